"""What ``make bench`` reads off the screen for "rows reordered" (tests/bench/dashboard_bench.py),
and the bare Textual app's lines (tests/bench/bare_app.py): checked here, since the bench
itself is no test."""

from __future__ import annotations

import sys

from helpers import REPO

sys.path.insert(0, str(REPO / "tests" / "bench"))

import bare_app
import dashboard_bench

from gputop.core.fake import load_fake_nvml


class _Screen:
    def __init__(self, lines: list[str]) -> None:
        self._lines = lines

    def lines(self) -> list[str]:
        return self._lines


def _gputop_screen(pids: list[int]) -> _Screen:
    rows = [
        f"│ {i % 8}    {pid}  alice  C     44.{i}G    90%   98%   30.3G     3d02h    python x  │"
        for i, pid in enumerate(pids)
    ]
    return _Screen(
        [
            " gputop  dgx-h100-07",
            "╭─ 200 processes ─╮",
            "│ GPU  PID      USER   TYPE  GPU MEM  SM    CPU   HOST MEM  ELAPSED  COMMAND  │",
            *rows,
            "╰─ Processes: all GPUs, by GPU memory (descending) ─╯",
        ]
    )


def test_the_first_20_rows_pids_are_read_top_down_from_gputops_table() -> None:
    pids = list(range(4300100, 4300125))
    read = dashboard_bench.gputop_top_rows(_gputop_screen(pids))
    assert read == tuple(pids[: dashboard_bench.TOP_ROWS])
    swapped = [pids[1], pids[0], *pids[2:]]
    assert dashboard_bench.gputop_top_rows(_gputop_screen(swapped)) != read


def test_nvitops_process_rows_are_read_the_same_way() -> None:
    lines = [
        "│ Processes:                                                  │",
        "│ GPU     PID      USER  GPU-MEM %SM  %CPU  %MEM  TIME  COMMAND │",
        "│   0 4300100 C   alice   44.0GiB  90  98.0  3.0  3days  python │",
        "│   1 4301047 C   frank    6.0GiB  10  14.0  0.7  2days  python │",
    ]
    assert dashboard_bench.nvitop_top_rows(_Screen(lines)) == (4300100, 4301047)


def test_the_bare_app_prints_a_line_per_card_from_nvml_alone() -> None:
    nvml = load_fake_nvml("dgx-h100", frozen_time=30.0)
    nvml.nvmlInit()
    try:
        lines = bare_app.card_lines(nvml)
    finally:
        nvml.nvmlShutdown()
    assert len(lines) == 8
    assert all(line.startswith(f"GPU {i}  NVIDIA H100") for i, line in enumerate(lines))
    assert sum(int(line.split()[-2]) for line in lines) == 200  # every card's processes
    screen = [f"{bare_app.TITLE}  8 GPUs  every 1 s", *lines, f"{bare_app.KEYS_LABEL} 0"]
    assert dashboard_bench.bare_frame_complete(screen)
    assert not dashboard_bench.bare_frame_complete(screen[:5])


def _figures(
    frame: float, cpu: float, written: float, rss: float, reorders: list[float]
) -> dashboard_bench.Figures:
    return dashboard_bench.Figures(
        first_frame_s=[frame],
        key_to_screen_ms=[8.0],
        cpu_per_wall=[cpu],
        bytes_per_s=[written],
        peak_rss_mib=[rss],
        reorder_seconds=reorders,
    )


def test_the_busy_report_holds_gputop_to_nvitop_and_the_bare_app() -> None:
    results = {
        "gputop": _figures(0.9, 0.025, 800.0, 60.0, [2.0, 1.0, 3.0]),
        "floor": _figures(0.7, 0.02, 2000.0, 45.0, []),
        "bare": _figures(0.5, 0.01, 1500.0, 40.0, []),
        "nvitop": _figures(1.4, 0.13, 1024.0, 32.0, [0.0, 0.0, 0.0]),
    }
    rows = {row.name: row for row in dashboard_bench.busy_report(results)}
    assert rows["first complete frame"].target.startswith("<= 1.5x bare = 0.75 s (is 1.80x")
    assert not rows["first complete frame"].met  # 0.9 s against 1.5 x 0.5 s
    assert rows["CPU, % of a core"].met  # 0.025 against 0.2 x 0.13
    assert rows["bytes to the terminal"].met  # 800 against 0.8 x 1024
    assert rows["peak RSS"].target.startswith("<= 1.4x bare = 56 MiB") and not rows["peak RSS"].met
    reordered = rows[f"first {dashboard_bench.TOP_ROWS} rows reordered"]
    assert reordered.met and reordered.by_app["floor"] == "-"
    assert reordered.by_app["gputop"].startswith("2 s (1-3)")
    results["gputop"].reorder_seconds = [29.0, 30.0, 28.0]
    rows = {row.name: row for row in dashboard_bench.busy_report(results)}
    assert not rows[f"first {dashboard_bench.TOP_ROWS} rows reordered"].met
