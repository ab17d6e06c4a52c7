"""A card more than one target reports (found by attacking the fleet): each was judged free
or not on its own target's word. Any target Prometheus scrapes may say it is node ``gpu1``
(its ``Hostname`` label) and that gpu1's busy cards (their ``UUID``s, or bare indices) are
free: ``pick --prometheus`` then printed ``gpu1 GPU-...`` for cards another user's job holds.
The same with no attacker: dcgm-exporter and gputop's exporter on one node report its cards
twice, and dcgm-exporter's word (no processes or claims known) made a claimed card free. A
card reported more than once is now free only where every report finds it free. From
answers built here as Prometheus gives them; docs/fleet.md, "Free"."""

from __future__ import annotations

from gputop.core.fleet.model import Fleet, build_fleet
from gputop.core.prometheus.client import Sample

NOW = 1_800_000_000.0
IDLE = {"DCGM_FI_DEV_FB_USED": 0.0, "DCGM_FI_DEV_FB_FREE": 80000.0, "DCGM_FI_DEV_GPU_UTIL": 0.0}
BUSY = {"DCGM_FI_DEV_FB_USED": 40000.0, "DCGM_FI_DEV_FB_FREE": 40000.0, "DCGM_FI_DEV_GPU_UTIL": 97}


def target(instance: str, job: str = "dcgm") -> dict[str, str]:
    return {"job": job, "instance": instance}


def cards(instance: str, host: str, figures: list[dict[str, float]], **how: str) -> list[Sample]:
    """A target's cards: ``figures`` each; ``how``: ``job``, ``uuids="no"`` (indices only)."""
    samples = []
    for index, values in enumerate(figures):
        labels = {**target(instance, how.get("job", "dcgm")), "gpu": str(index), "Hostname": host}
        if how.get("uuids") != "no":
            labels["UUID"] = f"GPU-{host}-{index}"
        samples += [Sample({**labels, "__name__": n}, NOW, v) for n, v in values.items()]
    return samples


def fleet(targets: list[tuple[str, str]], samples: list[Sample]) -> Fleet:
    def each(value: float) -> list[Sample]:
        return [Sample(target(i, job), NOW, value) for i, job in targets]

    answers = {"up": each(1.0), "scraped": each(NOW - 1), "scrapes": each(9.0), "cards": samples}
    sampled = {"__name__": "gputop_last_sample_timestamp_seconds"}  # gputop's: fresh
    answers["nodes"] = [Sample({**target(i, job), **sampled}, NOW, NOW) for i, job in targets]
    answers["nodes"] = [one for one in answers["nodes"] if one.labels["job"] == "gputop"]
    return build_fleet("http://p", NOW, answers, 7)


def free_on(built: Fleet) -> dict[str, list[int | None]]:
    return {node.instance: [gpu.index for gpu in node.free_gpus] for node in built.nodes}


def test_a_target_naming_another_nodes_busy_cards_free_makes_none_free() -> None:
    real = cards("gpu1:9400", "gpu1", [BUSY, BUSY, IDLE])
    forged = cards("evil:9400", "gpu1", [IDLE, IDLE, IDLE])  # gpu1's UUIDs, all free
    built = fleet([("gpu1:9400", "dcgm"), ("evil:9400", "dcgm")], real + forged)
    assert free_on(built) == {"gpu1:9400": [2], "evil:9400": [2]}


def test_bare_indices_on_the_same_host_name_are_the_same_cards() -> None:
    real = cards("gpu1:9400", "gpu1", [BUSY, IDLE])
    forged = cards("evil:9400", "gpu1", [IDLE, IDLE], uuids="no")
    built = fleet([("gpu1:9400", "dcgm"), ("evil:9400", "dcgm")], real + forged)
    assert free_on(built) == {"gpu1:9400": [1], "evil:9400": [1]}


def test_gputop_s_word_on_a_claimed_card_holds_beside_dcgm_exporter_s() -> None:
    dcgm = cards("gpu1:9400", "gpu1", [IDLE, IDLE])
    gputop = cards("gpu1:9101", "gpu1", [IDLE, IDLE], job="gputop")
    claimed = {**gputop[0].labels, "__name__": "gputop_gpu_claimed", "user": "alice"}
    built = fleet(
        [("gpu1:9400", "dcgm"), ("gpu1:9101", "gputop")],
        dcgm + gputop + [Sample(claimed, NOW, 1.0)],
    )
    assert free_on(built) == {"gpu1:9400": [1], "gpu1:9101": [1]}


def test_cards_of_other_nodes_or_every_report_free_are_as_before() -> None:
    one = cards("gpu1:9400", "gpu1", [BUSY, IDLE])
    other = cards("gpu2:9400", "gpu2", [IDLE, IDLE])
    twice = cards("gpu2:9101", "gpu2", [IDLE, IDLE], job="gputop")
    built = fleet(
        [("gpu1:9400", "dcgm"), ("gpu2:9400", "dcgm"), ("gpu2:9101", "gputop")],
        one + other + twice,
    )
    assert free_on(built) == {"gpu1:9400": [1], "gpu2:9400": [0, 1], "gpu2:9101": [0, 1]}
