"""The fleet model (gputop/core/fleet/): node states, the free rule, checked numbers and the
``--match`` selector, from answers built here as a Prometheus would give them. The same
against a real Prometheus: tests/real/test_fleet_prometheus.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gputop.core.errors import UsageError
from gputop.core.fleet.model import Fleet, FleetNode, build_fleet, fill_user_counts
from gputop.core.fleet.queries import (
    DETAIL_METRICS,
    USER_COUNTS,
    USER_MEMORY,
    check_selector,
    node_figures_query,
    refresh_queries,
    user_counts_query,
)
from gputop.core.fleet.read import FirstRead, read_node_figures
from gputop.core.prometheus.auth import server_for
from gputop.core.prometheus.client import PrometheusError, Sample

NOW = 1_800_000_000.0
TARGET = {"job": "dcgm", "instance": "n1:9400"}


def sample(value: float | None, **labels: str) -> Sample:
    return Sample({**TARGET, **labels}, NOW, value)


def card(name: str, value: float | None, gpu: str = "0", **labels: str) -> Sample:
    return sample(value, __name__=name, gpu=gpu, UUID=f"GPU-{gpu}", Hostname="n1", **labels)


def answers(scraped_age_s: float = 1.0, up: float = 1.0, **more: list[Sample]) -> dict:
    base = {
        "up": [sample(up)],
        "scraped": [sample(NOW - scraped_age_s)],
        "scrapes": [sample(9.0)],  # 2 minutes of 15-s scrapes
        "last_up": [sample(NOW - 600)],
        "cards": [
            card("DCGM_FI_DEV_FB_USED", 0.0),
            card("DCGM_FI_DEV_FB_FREE", 80000.0),
            card("DCGM_FI_DEV_GPU_UTIL", 0.0),
        ],
    }
    base.update(more)
    return base


def node(document: dict) -> object:
    (only,) = build_fleet("http://p", NOW, document, 7).nodes
    return only


def test_an_idle_card_on_a_fresh_node_is_free() -> None:
    found = node(answers())
    assert found.state == "up" and found.host == "n1" and found.interval_s == 15.0
    assert [gpu.free for gpu in found.sorted_gpus()] == [True]
    assert found.sorted_gpus()[0].memory_total_bytes == 80000 << 20


def test_three_scrape_intervals_without_news_is_stale_and_never_free() -> None:
    assert node(answers(scraped_age_s=40)).state == "up"
    stale = node(answers(scraped_age_s=50))
    assert stale.state == "stale" and not stale.free_gpus


def test_down_is_listed_with_when_it_was_last_up() -> None:
    down = node(answers(up=0.0))
    assert down.state == "down" and down.last_seen == NOW - 600 and not down.free_gpus


def test_a_target_prometheus_reports_no_up_for_is_stale() -> None:
    document = answers()
    del document["up"]
    assert node(document).state == "stale"


@pytest.mark.parametrize(
    ("extra", "free"),
    [
        ([card("DCGM_FI_DEV_FB_USED", 2000.0)], False),  # 2 GB used: someone is there
        ([card("DCGM_FI_DEV_GPU_UTIL", 50.0)], False),
        ([card("DCGM_FI_DEV_GPU_UTIL", None)], False),  # NaN, negative: unknown, not free
        ([card("DCGM_FI_DEV_GPU_UTIL", 1e9)], False),  # no percentage
        ([card("DCGM_FI_DEV_FB_USED", None)], False),
        ([card("DCGM_FI_DEV_FB_FREE", 100.0)], False),  # under the policy's 1 GiB free
        ([card("DCGM_FI_DEV_POWER_USAGE", 1e300)], True),  # a power past any: unknown
        ([card("DCGM_FI_DEV_FB_USED", 0.0, pod="train")], False),  # a pod holds it
        ([card("gputop_gpu_claimed", 1.0, user="bob")], False),
        ([card("gputop_gpu_processes", 1.0)], False),
        ([card("gputop_gpu_processes", 0.0)], True),
        ([card("gputop_gpu_lost", 1.0)], False),
    ],
)
def test_the_free_rule(extra: list[Sample], free: bool) -> None:
    document = answers()
    document["cards"] = document["cards"] + extra
    document["nodes"] = [sample(NOW, __name__="gputop_last_sample_timestamp_seconds")]
    assert bool(node(document).free_gpus) is free


def test_a_gputop_node_whose_sampler_is_stuck_is_stale() -> None:
    document = answers()
    document["nodes"] = [sample(NOW - 3600, __name__="gputop_last_sample_timestamp_seconds")]
    assert node(document).state == "stale"
    document["nodes"] = [sample(NOW - 30, __name__="gputop_last_sample_timestamp_seconds")]
    assert node(document).state == "up"  # within 45 s: three of its default samples


def test_only_the_jobs_that_serve_gpus_are_nodes() -> None:
    document = answers()
    other = {"job": "prometheus", "instance": "p:9090"}
    down_gpu_node = {"job": "dcgm", "instance": "n2:9400"}
    document["up"] += [Sample(other, NOW, 1.0), Sample(down_gpu_node, NOW, 0.0)]
    fleet = build_fleet("http://p", NOW, document, 7)
    assert [(n.instance, n.state) for n in fleet.nodes] == [
        ("n1:9400", "up"),
        ("n2:9400", "down"),  # listed by its instance: nothing else is known of it
    ]
    assert fleet.nodes[1].host == "n2:9400"


@pytest.mark.parametrize(
    ("selector", "matchers"),
    [
        ('{cluster="a"}', 'cluster="a"'),
        ('{ job=~"gpu.*", rack!="r9", }', 'job=~"gpu.*", rack!="r9"'),
        ('{a="x\\"}y"}', 'a="x\\"}y"'),
        ("{}", ""),
    ],
)
def test_a_selector_narrows_every_query(selector: str, matchers: str) -> None:
    assert check_selector(selector) == matchers
    if matchers:
        for promql in refresh_queries(matchers).values():
            assert matchers in promql


@pytest.mark.parametrize(
    "selector", ['cluster="a"', '{cluster="a"} or up', "{cluster=a}", '{a="b"}}', '{"a"="b"}']
)
def test_a_selector_that_is_not_one_is_refused(selector: str) -> None:
    with pytest.raises(UsageError):
        check_selector(selector)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["snapshot", "--prometheus", "http://p:9090", "--group-by", "a-b"], "--group-by"),
        (["snapshot", "--match", '{a="b"}'], "--match goes with --prometheus"),
        (["snapshot", "--prometheus-auth-file", "/nonexistent"], "go with --prometheus"),
        (["pick", "--prometheus"], "GPUTOP_PROMETHEUS, which is not set"),
        (["--prometheus", "http://p:9090", "--hosts", "a"], "--hosts asks over ssh"),
        (
            ["snapshot", "--prometheus", "http://p:9090", "--watch"],
            "--watch and --stats are not for it",
        ),
        (["snapshot", "--prometheus", "http://p:9090", "--match", "up"], "label matchers"),
        (["pick", "--prometheus", "http://u:pw1@p:9090", "--prometheus-ca", "/x"], "https://"),
    ],
)
def test_what_a_person_types_wrong_is_said_with_exit_2(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gputop.cli.main import main

    monkeypatch.delenv("GPUTOP_PROMETHEUS", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "pw1" not in err


def test_a_target_scraped_a_few_times_yet_does_not_slow_the_refresh() -> None:
    """Three scrapes in the two-minute window are as many from a 5-s target that started
    ten seconds ago as from a 60-s one: the refresh waits at most Prometheus's default (it
    read every 60 s for two minutes after a target started, before); each node keeps its own
    estimate for its staleness."""
    young = build_fleet("http://p", NOW, answers(scrapes=[sample(3.0)]), 7)
    assert young.interval_s == 15.0 and young.nodes[0].interval_s == 60.0
    settled = build_fleet("http://p", NOW, answers(scrapes=[sample(25.0)]), 7)
    assert settled.interval_s == 5.0


def test_the_dashboards_refresh_leaves_out_what_its_table_does_not_show() -> None:
    """Without ``every_figure`` the cards' query has no temperature, power or activity, and
    the processes are not asked (both read for one node when it is opened); the other six
    queries are the same."""
    whole, lean = refresh_queries(""), refresh_queries("", every_figure=False)
    assert whole.keys() - lean.keys() == {"processes"}
    assert {k for k in lean if whole[k] != lean[k]} == {"cards", "card_labels", "nodes"}
    assert lean["card_labels"].startswith("max by (__name__, job, instance, UUID, gpu, Hostname")
    assert whole["card_labels"] in lean["card_labels"]
    for name in DETAIL_METRICS:
        assert name in whole["cards"] and name not in lean["cards"]
    for name in ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS"):
        assert name in lean["cards"]


def test_the_dashboards_refresh_reads_only_the_users_memory() -> None:
    """Its table shows only the users' memory: their idle memory and GPU counts are asked
    by the users' view when it opens (``user_counts_query``), never by a refresh; the full
    read (``snapshot``, ``pick``) asks all three."""
    whole, lean = refresh_queries(""), refresh_queries('rack="r1"', every_figure=False)
    for name in USER_COUNTS:
        assert name in whole["nodes"] and name in user_counts_query("")
        assert all(name not in promql for promql in lean.values())
    assert lean["nodes"] == '{__name__="gputop_user_memory_used_bytes", rack="r1"}'
    assert user_counts_query('rack="r1"').endswith(', rack="r1"}')


def _user(name: str, user: str, value: float | None, instance: str = "n1:9400") -> Sample:
    return Sample({**TARGET, "instance": instance, "__name__": name, "user": user}, NOW, value)


def test_the_users_counts_filled_in_are_the_full_reads() -> None:
    """``fill_user_counts`` on the dashboard's fleet gives the users the full read has,
    each count range-checked; a node the fleet lacks and other series are passed over."""
    sampled = Sample({**TARGET, "__name__": "gputop_last_sample_timestamp_seconds"}, NOW, NOW)
    memory = [sampled, _user(USER_MEMORY, "ann", 5e9), _user(USER_MEMORY, "bo", 1e9)]
    counts = [
        _user("gputop_user_gpus", "ann", 2.0),
        _user("gputop_user_idle_held_memory_bytes", "ann", 1e9),
        _user("gputop_user_gpus", "bo", float("nan")),
        _user("gputop_user_idle_held_memory_bytes", "bo", -1.0),
        _user("gputop_user_gpus", "ann", 7.0, instance="gone:9400"),
        _user(USER_MEMORY, "ann", 1e12),  # not a count: passed over
    ]
    up = [sample(1.0)]
    base = {"up": up, "scraped": [sample(NOW - 1)], "scrapes": [sample(9.0)]}
    card = [sample(100.0, __name__="DCGM_FI_DEV_FB_USED", gpu="0", UUID="GPU-0")]
    whole = build_fleet("http://p", NOW, {**base, "cards": card, "nodes": memory + counts[:4]}, 8)
    lean = build_fleet(
        "http://p", NOW, {**base, "cards": card, "nodes": memory}, 7, every_figure=False
    )
    assert whole.user_counts and not lean.user_counts
    assert lean.nodes[0].state == "up" and [u.gpus for u in lean.users] == [0, 0]
    assert all(u.idle_held_memory_bytes is None for u in lean.users)
    fill_user_counts(lean, counts)
    assert lean.user_counts and lean.users == whole.users
    ann, bo = lean.users
    assert (ann.gpus, ann.idle_held_memory_bytes, ann.memory_used_bytes) == (2, 1e9, 5e9)
    assert (bo.gpus, bo.idle_held_memory_bytes, bo.nodes) == (0, None, 1)


def test_a_nodes_figures_query_quotes_its_labels_or_refuses() -> None:
    promql = node_figures_query('rack="r1"', 'jo"b', "10.0.0.1:9400\n")
    assert promql is not None
    for each in promql:  # the cards' figures, the processes
        assert 'job="jo\\"b", instance="10.0.0.1:9400\\n", rack="r1"' in each
    assert "DCGM_FI_DEV_GPU_TEMP" in promql[0] and "gputop_process_" in promql[1]
    assert node_figures_query("", "nodes", "bad\ud800") is None  # no UTF-8 for it
    node = FleetNode(instance="bad\ud800", job="nodes")
    with pytest.raises(PrometheusError, match="not text a query can carry"):
        read_node_figures(server_for("http://127.0.0.1:1"), node)


def test_the_first_read_starts_before_the_dashboard_and_is_followed_once() -> None:
    """``FirstRead`` (begun before Textual loads): the app's first ``follow`` gets its early
    fleet, then the whole; the big answers wait until the early one is painted; a second
    ``follow`` reads afresh; an error reaches the follower."""
    import threading

    early_fleet = build_fleet("http://p", NOW, {}, 5, partial=True)
    whole_fleet = build_fleet("http://p", NOW, {}, 8)
    held = threading.Event()
    calls: list[str] = []

    def read(early: Callable[[Fleet], None]) -> Fleet:
        calls.append("read")
        early(early_fleet)
        held.set()  # only once the follower has painted the early fleet
        return whole_fleet

    first = FirstRead.start(read)
    seen: list[tuple[Fleet, bool]] = []
    assert first.follow(lambda fleet: seen.append((fleet, held.is_set()))) is whole_fleet
    assert seen == [(early_fleet, False)] and held.is_set()
    assert first.follow(lambda fleet: None) is whole_fleet and calls == ["read", "read"]

    def failing(early: Callable[[Fleet], None]) -> Fleet:
        raise PrometheusError("Cannot reach Prometheus at http://p: connection refused.")

    with pytest.raises(PrometheusError, match="connection refused"):
        FirstRead.start(failing).follow(lambda fleet: None)


def test_a_fresh_nodes_age_is_its_interval_and_holds_still_a_late_ones_is_exact() -> None:
    from gputop.core.fleet.fleet_text import age

    def shown(scraped_age_s: float, up: float = 1.0) -> str:
        fleet = build_fleet("http://p", NOW, answers(scraped_age_s, up), 7)
        return age(fleet, fleet.nodes[0])

    # Within one 15-s interval the row does not change as the scrape cycle turns.
    assert shown(1.0) == shown(9.0) == shown(15.0) == "<15s"
    assert shown(20.0) == "20s"  # late, not yet stale: the exact age
    assert shown(60.0) == "60s"  # stale
    assert shown(300.0, up=0.0) == "10m"  # down: since it was last up

    fleet = build_fleet("http://p", NOW, answers(0.1), 7)
    for interval_s, text in ((0.3, "<1s"), (9.4, "<10s"), (125.0, "<3m")):
        fleet.nodes[0].interval_s = interval_s
        assert age(fleet, fleet.nodes[0]) == text
