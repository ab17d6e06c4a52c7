"""A host's data is as untrusted as a process name: one bad host never hurts the lab.

Each host's lines go through the same decoding a live link uses (HostFeed); the statuses are
then printed (``snapshot --hosts``, text and JSON), judged (``pick --hosts``, ``run
--hosts``) and drawn (the lab dashboard) beside a healthy host. See docs/security.md.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import replace
from typing import Any

import pytest
from helpers.hostile import BIG, HOSTILE, controls_left, drawn_controls, terminal_bytes
from helpers.hostile_hosts import (
    GOOD,
    NOW,
    agent_lines,
    hostile_streams,
    raw_line,
    replay,
)
from helpers.lab_dashboard import first_lab_sample, make_lab_app
from helpers.waiting import pilot_wait_for
from hypothesis import HealthCheck, given, settings

from gputop.cli.lab_pick import first_host_with
from gputop.cli.lab_snapshot import lab_json, render_host
from gputop.core.free_cards import FreePolicy
from gputop.core.remote import host_jobs as host_jobs_module
from gputop.core.remote.host_jobs import MAX_HOST_JOBS
from gputop.core.remote.reduced import MARK_APPS, MARK_END, MARK_GPUS, ReducedFrames
from gputop.core.remote.status import HostStatus, LinkState
from gputop.tui.lab.lab_grid import LabGrid
from gputop.tui.lab.lab_jobs import LabJobsPanel

WIDTH = 160


def strict_loads(text: str) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def good_host() -> HostStatus:
    return replay("good", agent_lines(GOOD))


def bad_host(**gpu0: Any) -> HostStatus:
    document = copy.deepcopy(GOOD)
    document["gpus"][0].update(gpu0)
    return replay("bad", agent_lines(document))


def test_an_absurd_timestamp_is_the_arrival_time_and_the_host_still_prints() -> None:
    document = copy.deepcopy(GOOD)
    document["timestamp"] = 1e308

    status = replay("bad", agent_lines(document))

    assert status.snapshot is not None and status.snapshot.timestamp == NOW
    assert status.impossible_values == 1
    assert "sent 1 impossible value (shown as N/A)" in render_host(status, WIDTH)


def test_impossible_gpu_values_are_na_and_counted_once_in_the_status() -> None:
    status = bad_host(
        power_w=float("nan"),
        power_limit_w=float("inf"),
        memory_used_bytes=-5,
        temperature_c=10**20,
        utilization_gpu=-400,
        fan_percent=150,  # fans may run above their rated speed: kept
    )

    gpu = status.snapshot.gpus[0]  # type: ignore[union-attr]
    assert (gpu.power_w, gpu.power_limit_w, gpu.memory_used_bytes) == (None, None, None)
    assert (gpu.temperature_c, gpu.utilization_gpu_percent, gpu.fan_percent) == (None, None, 150)
    text = render_host(status, WIDTH)
    assert text.count("sent 5 impossible values") == 1
    for shown in ("nan", "inf W", "-400", "100000000000000000000"):
        assert shown not in text


def test_memory_beyond_the_cards_total_is_na() -> None:
    total = GOOD["gpus"][0]["memory_total_bytes"]

    status = bad_host(memory_used_bytes=total + 1, memory_free_bytes=total)

    gpu = status.snapshot.gpus[0]  # type: ignore[union-attr]
    assert (gpu.memory_used_bytes, gpu.memory_free_bytes) == (None, total)
    assert status.impossible_values == 1


def test_a_process_with_an_impossible_pid_is_left_out_and_counted() -> None:
    document = copy.deepcopy(GOOD)
    gpu = next(g for g in document["gpus"] if g["processes"])
    listed = len(gpu["processes"])
    gpu["processes"][0]["pid"] = -7

    status = replay("bad", agent_lines(document))

    (checked,) = [g for g in status.snapshot.gpus if g.physical_index == gpu["index"]]  # type: ignore[union-attr]
    assert len(checked.processes) == listed - 1
    assert checked.processes_dropped == 1
    assert status.impossible_values == 1


def test_a_clock_hours_ahead_is_shown_and_its_data_timed_by_arrival() -> None:
    document = copy.deepcopy(GOOD)
    document["timestamp"] = NOW + 3 * 3600

    status = replay("skewed", agent_lines(document))

    assert status.snapshot is not None and status.snapshot.timestamp == NOW
    assert status.clock_skew_s == 3 * 3600
    assert "clock 3 h ahead" in status.describe()
    starts = [p.start_time for g in status.snapshot.gpus for p in g.processes]
    assert starts and starts == [None] * len(starts)  # no ages from a clock that is off


def test_a_simulated_hosts_frozen_clock_is_its_scenarios() -> None:
    document = copy.deepcopy(GOOD)
    document["timestamp"] = NOW - 300 * 86400
    document["simulated"] = "v100x4"

    status = replay("simulated", agent_lines(document))

    assert status.clock_skew_s is None and status.describe() == "live"


def test_a_clock_a_few_seconds_off_is_trusted() -> None:
    document = copy.deepcopy(GOOD)
    document["timestamp"] = NOW - 5

    status = replay("near", agent_lines(document))

    assert status.clock_skew_s is None and status.snapshot.timestamp == NOW - 5  # type: ignore[union-attr]
    assert status.describe() == "live"


def test_the_json_of_a_host_that_sends_nan_is_strict_json() -> None:
    status = bad_host(power_w=float("nan"))

    document = strict_loads(lab_json([status, good_host()], indent=2))

    assert document["hosts"][0]["snapshot"]["gpus"][0]["power_w"] is None
    assert "impossible" in document["hosts"][0]["status"]


def test_a_snapshot_of_the_wrong_type_marks_the_host_and_keeps_its_last_data() -> None:
    document = copy.deepcopy(GOOD)
    document["gpus"][0]["name"] = 5
    lines = [*agent_lines(GOOD), raw_line("snapshot", snapshot=document)]

    status = replay("bad", lines)

    assert status.snapshot is not None and status.snapshot.gpus[0].name == GOOD["gpus"][0]["name"]
    assert status.unreadable_lines == 1
    assert "1 unreadable line (gpus[0].name is not a string)" in status.describe()


def test_impossible_job_records_claim_nothing_and_break_nothing() -> None:
    jobs = [
        {"id": "x", "status": "running", "gpus": [0]},
        {"id": 2, "status": "running", "gpus": "0", "created_at": "soon"},
        {"id": 3, "status": "running", "gpus": [1, -1, 10**20], "created_at": float("nan")},
        {"id": 4, "status": "done", "created_at": NOW, "started_at": 1e308},
    ]
    status = replay("bad", agent_lines(GOOD, jobs=jobs))

    assert [job["id"] for job in status.jobs or []] == [2, 3, 4]
    assert [job.get("gpus") for job in status.jobs or []] == [[], [1], None]
    assert status.impossible_values == 6
    found, _ = first_host_with([status], 1, FreePolicy())
    assert found is not None


def test_nvidia_smi_readings_that_are_not_finite_are_na() -> None:
    frames = ReducedFrames("reduced", clock=lambda: NOW)
    line = (
        "0, GPU-0, 00000000:07:00.0, 1e999, nan, 16384, inf, -inf, 1e400, 40, nan, 1e308, "
        "300, 1530, 1530, 877, 1530, 1530, 877, P0, 535.104.05, Tesla V100"
    )
    snapshot = None
    for text in (MARK_GPUS, line, MARK_APPS, "GPU-0, 1e999, 1e999, python", MARK_END):
        snapshot = frames.feed(text) or snapshot

    assert snapshot is not None
    gpu = snapshot.gpus[0]
    assert (gpu.memory_total_bytes, gpu.memory_used_bytes, gpu.utilization_gpu_percent) == (
        None,
        None,
        None,
    )
    assert gpu.power_w is None and gpu.memory_free_bytes == 16384 * 2**20
    assert frames.impossible_in_frame >= 6


def test_a_reduced_host_with_impossible_readings_says_so() -> None:
    lines = [
        "@reduced",
        MARK_GPUS,
        "0, GPU-0, 00000000:07:00.0, 16384, 20000, 0, -400, 0, 1e20, 40, 0, 100, 300, "
        "1530, 1530, 877, 1530, 1530, 877, P0, 535.104.05, Tesla V100",
        MARK_APPS,
        "GPU-0, -3, 100, python",
        MARK_END,
    ]

    status = replay("reduced", lines)

    gpu = status.snapshot.gpus[0]  # type: ignore[union-attr]
    assert gpu.memory_used_bytes is None and gpu.temperature_c is None
    assert gpu.utilization_gpu_percent is None and gpu.processes == ()
    assert status.impossible_values == 4
    assert "sent 4 impossible values" in status.describe()


def _no_control_bytes(text: str) -> None:
    assert controls_left(text) == [], text


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(lines=hostile_streams())
def test_any_agent_lines_leave_the_cli_whole_and_the_healthy_host_intact(lines: list[str]) -> None:
    good = good_host()
    bad = replay(f"bad{HOSTILE}", lines)
    statuses = [bad, good]

    text = "\n\n".join(render_host(status, WIDTH) for status in statuses)
    _no_control_bytes(text)
    assert text.endswith(render_host(good, WIDTH))
    document = strict_loads(lab_json(statuses, indent=2))
    assert document["hosts"][1] == strict_loads(lab_json([good]))["hosts"][0]
    for need_full in (False, True):  # pick --hosts, run --hosts
        found, reasons = first_host_with(statuses, 2, FreePolicy(), need_full=need_full)
        expected, _ = first_host_with([good], 2, FreePolicy(), need_full=need_full)
        assert found is not None and expected is not None
        assert (found.status.host, found.uuids) in (
            ("good", expected.uuids),
            (bad.host, found.uuids),
        )
        _no_control_bytes("\n".join(reasons))


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(first=hostile_streams(), second=hostile_streams(), third=hostile_streams())
def test_any_agent_lines_leave_the_lab_dashboard_running(
    first: list[str], second: list[str], third: list[str]
) -> None:
    statuses = [replay(f"bad{HOSTILE}{n}", lines) for n, lines in enumerate((first, second, third))]
    statuses.append(good_host())
    asyncio.run(_draw_lab(statuses))


async def _draw_lab(statuses: list[HostStatus]) -> None:
    app = make_lab_app(statuses)
    async with app.run_test(size=BIG) as pilot:
        await first_lab_sample(pilot)
        await pilot.press("J")  # the jobs of every host, sorted by their creation times
        await pilot.pause()
        assert app.query_one(LabJobsPanel).display
        assert drawn_controls(terminal_bytes(app), BIG[1]) == []
        assert app.statuses[-1].state is LinkState.LIVE
        assert app.return_code is None  # nothing took the dashboard down


async def test_a_host_sending_100000_jobs_has_only_its_newest_decoded_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store keeps every job and an older agent sends them all; a hostile one sends
    100,000 records (each decoded on the UI thread: 0.87 s a list). The lab decodes the
    newest MAX_HOST_JOBS and says on the panel how many were sent."""
    sent = 100_000
    records = [{"id": n, "name": f"j{n}", "status": "exited"} for n in range(1, sent + 1)]
    flood = replay("flood", agent_lines(GOOD, jobs=records))
    assert len(flood.jobs or ()) == sent
    decoded: list[int] = []
    decode = host_jobs_module._decoded

    def counted(host, name, record, local):  # type: ignore[no-untyped-def]
        decoded.append(record["id"])
        return decode(host, name, record, local)

    monkeypatch.setattr(host_jobs_module, "_decoded", counted)
    good = replace(good_host(), jobs=[{"id": 7, "name": "mine", "status": "running"}])
    app = make_lab_app([flood, good])
    async with app.run_test(size=BIG) as pilot:
        await first_lab_sample(pilot)
        await pilot.press("J")
        panel = app.query_one(LabJobsPanel)
        await pilot_wait_for(pilot, lambda: panel.row_count > 0, "the jobs shown")

        assert sorted(decoded) == [7, *range(sent - MAX_HOST_JOBS + 1, sent + 1)]
        assert panel.row_count == MAX_HOST_JOBS  # of both hosts: the good host's active job
        assert [str(cell) for cell in panel.get_row("1:7")[:2]] == ["good", "7"]
        assert f"flood: newest {MAX_HOST_JOBS} of 100,000 jobs shown" in str(panel.border_subtitle)
        shown = [job.id for job in app.remote_jobs if job.host == 0]
        assert shown == list(range(sent - MAX_HOST_JOBS + 1, sent + 1))
        for _ in range(3):  # redraws of the same list decode nothing again
            app._show_lab(app.source.statuses())
        assert len(decoded) == MAX_HOST_JOBS + 1
        await pilot.press("g")  # the dashboard still answers its keys
        await pilot_wait_for(pilot, lambda: app.query_one(LabGrid).host == 1, "the next host")
