"""Claims where people look (docs/claims.md, "What is shown"): the dashboard's cards, the
lab's protocol and cards, ``snapshot --json``, the exporter."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.claims import User, gputop_as
from helpers.dashboard import first_sample

from gputop.core.claims.book import Card, ClaimBook
from gputop.core.claims.view import card_claim_text, left_text
from gputop.core.model import GpuClaim
from gputop.core.remote.host_values import check_snapshot
from gputop.core.remote.protocol import ProtocolError, snapshot_from_json
from gputop.core.snapshot_json import snapshot_to_json
from gputop.tui.screenshots import SIZES, build_app
from gputop.tui.widgets.gpu_grid import GpuGrid

GPU0 = "GPU-5a9e5b38-bd6d-2f23-3b22-d42f6e26aa55"  # v100x4's GPU 0: ubuntu's processes
GPU1 = "GPU-96870f72-ff47-4de2-1bb0-99f7d8338c12"  # v100x4's GPU 1


def claim_as_root(directory: Path, gpu: int, uuid: str, for_s: float, note: str) -> None:
    book = ClaimBook.open({"GPUTOP_CLAIMS_DIR": str(directory)})
    assert book is not None
    with book:
        book.claim([Card(uuid, gpu, f"GPU {gpu}")], for_s, note)


def test_a_claimed_card_looks_as_approved(snap_compare, claims_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """GPU 1 claimed by root for 2 hours with a note; GPU 0's processes are ubuntu's, who
    has no claim while claims are in use."""
    claim_as_root(claims_dir, 1, GPU1, 2 * 3600, "paper deadline")
    assert snap_compare(build_app("v100x4"), terminal_size=SIZES["160x48"], run_before=first_sample)


async def test_each_card_says_who_claimed_it_and_who_uses_it_without_a_claim(
    claims_dir: Path,
) -> None:
    claim_as_root(claims_dir, 1, GPU1, 2 * 3600, "paper\x1b[2J")
    app = build_app("v100x4")
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        gpus = {gpu.physical_index: gpu for gpu in app.snapshot.gpus}
        assert gpus[1].claim is not None and gpus[1].claim.user == "root"
        said = card_claim_text(gpus[1], time.time())
        assert said == "claimed by root · 2h left · paper\\e[2J"
        assert card_claim_text(gpus[2], time.time()) is None
        # ubuntu uses GPU 0 without a claim, as snapshot --json says; on a card nobody
        # claimed that is no one's business, and the card's border says nothing of it
        assert gpus[0].unclaimed_users == ("ubuntu",)
        assert card_claim_text(gpus[0], time.time()) is None


async def test_a_claimed_card_says_who_else_uses_it_without_a_claim(claims_dir: Path) -> None:
    claim_as_root(claims_dir, 0, GPU0, 2 * 3600, "")
    app = build_app("v100x4")
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        gpu = app.snapshot.gpus[0]
        said = card_claim_text(gpu, time.time())
        assert said == "claimed by root · 2h left · in use without a claim: ubuntu"


async def test_a_one_line_card_says_who_claimed_it(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    """In a terminal too short for bordered cards (a tmux pane) each card is one line, with
    no border to carry the claim: it goes where the sparkline was, the figures keep theirs."""
    ana, _ = two_users
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "1", "--note", "n").returncode == 0
    for size, said in (((100, 30), f"claimed by {ana.name}"), ((80, 24), "claimed by an")):
        app = build_app("v100x4")
        async with app.run_test(size=size) as pilot:
            await first_sample(pilot)
            grid = app.query_one(GpuGrid)
            assert grid.card_state(1).compact
            (line,) = grid.card_lines(1)
            assert said in line, line
            assert "MiB" in line and "°C" in line and line.rstrip().endswith(" W"), line
            assert "claimed" not in grid.card_lines(2)[0]


def test_snapshot_json_carries_the_claim_of_each_gpu(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "1", "--note", "n").returncode == 0
    shown = gputop_as(bob, claims_dir, "snapshot", "--json")
    gpus = json.loads(shown.stdout)["gpus"]
    claim = gpus[1]["claim"]
    assert (claim["user"], claim["note"], claim["job"]) == (ana.name, "n", None)
    assert 4 * 3600 - 60 < claim["until"] - time.time() <= 4 * 3600
    assert [g["claim"] for g in gpus if g["index"] != 1] == [None, None, None]
    assert gpus[0]["unclaimed_users"] == ["ubuntu"]  # the scenario's processes
    text = gputop_as(bob, claims_dir, "snapshot").stdout.splitlines()
    assert text[text.index(next(line for line in text if line.startswith("[1]"))) + 1] == (
        f"    claimed by {ana.name} · 4h left · n"
    )
    # GPU 0 is nobody's claim: who uses it without one is in the JSON, not on its line
    assert not any("without a claim" in line for line in text)


def test_the_lab_protocol_carries_claims_and_checks_them(fake_backend) -> None:
    snapshot = fake_backend("v100x4").sample()
    claimed = GpuClaim("ana", time.time() + 3600, "sweep", 12)
    gpus = list(snapshot.gpus)
    gpus[1] = replace(gpus[1], claim=claimed, unclaimed_users=("bob",))
    document = snapshot_to_json(replace(snapshot, gpus=tuple(gpus)))
    back = snapshot_from_json(json.loads(json.dumps(document)))
    assert back.gpus[1].claim == claimed
    assert back.gpus[1].unclaimed_users == ("bob",)
    assert back.gpus[0].claim is None

    hostile = json.loads(json.dumps(document))
    hostile["gpus"][1]["claim"]["until"] = 1e300
    hostile["gpus"][2]["claim"] = {"user": "x" * 10_000, "until": time.time(), "job": -4}
    hostile["gpus"][3]["unclaimed_users"] = ["u"] * 100_000
    read = snapshot_from_json(hostile)
    checked = check_snapshot(read, time.time())
    assert checked.snapshot.gpus[1].claim is None  # an end no clock reaches
    assert checked.snapshot.gpus[2].claim is None  # a job id that cannot be
    assert {"gpus[1].claim", "gpus[2].claim"} <= set(checked.impossible)
    assert len(read.gpus[3].unclaimed_users) == 64
    assert read.gpus[2].claim is not None and len(read.gpus[2].claim.user) == 200

    for bad in ({"user": "a"}, {"user": 3, "until": 1.0}, "ana"):
        wrong = json.loads(json.dumps(document))
        wrong["gpus"][1]["claim"] = bad
        with pytest.raises(ProtocolError, match=r"gpus\[1\]\.claim"):
            snapshot_from_json(wrong)


def test_an_agent_sends_its_machines_claims(claims_dir: Path, tmp_path: Path) -> None:
    claim_as_root(claims_dir, 1, GPU1, 3600, "")
    agent = subprocess.Popen(
        [sys.executable, "-m", "gputop", "agent", "--fake", "v100x4", "--interval", "0.2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={
            "PATH": "/usr/bin:/bin",
            "GPUTOP_STATE_DIR": str(tmp_path / "state"),
            "GPUTOP_CLAIMS_DIR": str(claims_dir),
        },
    )
    assert agent.stdout is not None and agent.stdin is not None
    lines = [json.loads(agent.stdout.readline()) for _ in range(2)]
    agent.stdin.close()
    agent.wait(10)
    gpus = lines[1]["snapshot"]["gpus"]
    assert gpus[1]["claim"]["user"] == "root"
    assert snapshot_from_json(lines[1]["snapshot"]).gpus[1].claim is not None


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (7199, "2h"),
        (5500, "2h"),
        (3000, "50m"),
        (20, "1m"),
        (-5, "1m"),
        (90000, "1d 1h"),
        (86399, "1d"),
    ],
)
def test_time_left_is_said_coarsely(seconds: float, said: str) -> None:
    assert left_text(seconds) == said
    assert not math.isnan(seconds)


async def test_the_launch_dialog_shows_another_users_claim(claims_dir: Path) -> None:
    """The dashboard's user is alice (build_app); root claimed GPU 1."""
    from helpers.dashboard import plain_text
    from textual.widgets import Static

    from gputop.tui.screens.launch import LaunchScreen

    claim_as_root(claims_dir, 1, GPU1, 3600, "")
    app = build_app("v100x4")
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        await pilot.press("right", "l")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)
        preview = plain_text(app.screen.query_one("#preview", Static), width=200)
        assert "⚠ GPU 1 is claimed by root (1h left): the job will not start there" in preview


def test_the_exporter_exports_who_claimed_each_gpu(claims_dir: Path, fake_backend) -> None:
    from helpers.exporter import samples

    from gputop.core.exporter.collector import SnapshotCollector

    claim_as_root(claims_dir, 1, GPU1, 3600, "")
    collector = SnapshotCollector(top=5)
    collector.record(fake_backend("v100x4").sample(), 0.01)
    claimed = samples(collector, "gputop_gpu_claimed")
    assert [(s.labels["gpu"], s.labels["user"], s.value) for s in claimed] == [("1", "root", 1.0)]


async def test_the_lab_cards_say_who_claimed_them(claims_dir: Path) -> None:
    """The lab's simulated hosts sample this machine's claims as an agent would."""
    from helpers.lab_dashboard import first_lab_sample, lab_cards

    from gputop.tui.lab.fixed_hosts import LAB_SCENARIOS, simulated_status
    from gputop.tui.screenshots import build_lab_app

    status = simulated_status("gpu01", LAB_SCENARIOS[0])
    assert status.snapshot is not None
    gpu = status.snapshot.gpus[1]
    assert gpu.uuid is not None
    claim_as_root(claims_dir, 1, gpu.uuid, 3 * 3600, "lab")
    app = build_lab_app(5)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        said = [text for cards, i in lab_cards(app) if (text := cards.subtitle(i))]
        # the claim text is cut to the card's width, its state kept (P0)
        assert any(
            text.startswith("claimed by root · 3h left") and text.endswith("… · P0")
            for text in said
        ), said


def test_a_hosts_snapshot_with_a_claim_makes_its_card_taken_for_the_labs_pick(
    fake_backend,
) -> None:
    """``pick --hosts`` and the lab's host summary judge a host's cards from its snapshot."""
    from gputop.core.free_cards import FreePolicy, judge_cards

    snapshot = fake_backend("v100x4").sample()
    gpus = list(snapshot.gpus)
    gpus[2] = replace(gpus[2], claim=GpuClaim("ana", time.time() + 7000))
    claimed = replace(snapshot, gpus=tuple(gpus))
    verdicts = {v.physical_index: v for v in judge_cards(claimed, FreePolicy(), "bob")}
    assert not verdicts[2].free
    assert verdicts[2].reasons == ("claimed by ana (2h left)",)
    assert {v.physical_index: v for v in judge_cards(claimed, FreePolicy(), "ana")}[2].free


async def test_the_throttle_badge_keeps_its_place_beside_a_long_claim_text(
    claims_dir: Path,
) -> None:
    """dgx-h100's GPU 3 runs power capped at the frozen second; root claims it with a long
    note while others use it without a claim: that text is what gets cut."""
    from gputop.tui.widgets.gpu_grid import GpuGrid

    note = "ablation sweep for the paper, do not touch"
    claim_as_root(claims_dir, 3, "GPU-951c129f-8d65-0d28-1e55-945d0384bbeb", 3600, note)
    app = build_app("dgx-h100")
    async with app.run_test(size=(200, 50)) as pilot:
        await first_sample(pilot)
        grid = app.query_one(GpuGrid)
        bottom = grid.card_lines(3)[-1]
        assert bottom.startswith("╰─ claimed by root") and bottom.endswith(" ─╯"), bottom
        assert "… · P0 · ⚠ power cap <1m ─╯" in bottom, bottom
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        bottom = grid.card_lines(3)[-1]
        assert bottom.endswith("… · P0 · ⚠ power cap <1m ─╯"), bottom
        # no other card's border speaks of claims: nobody claimed them
        assert all("claim" not in grid.card_lines(i)[-1] for i in (0, 1, 2, 4, 5, 6, 7))
