"""The process table, our own Line API widget: rows, highlight, mouse, marks and painting."""

from __future__ import annotations

import dataclasses
import getpass
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from helpers.dashboard import first_sample, make_app, spy_on_refresh
from helpers.jobs import snapshot_of
from helpers.scenarios import minimal_gpu
from rich.cells import cell_len
from textual import events
from textual.pilot import Pilot
from textual.strip import Strip

from gputop.core.jobs.service import JobsView
from gputop.core.model import GpuProcess, ProcessType, Snapshot
from gputop.tui.app import GputopApp
from gputop.tui.screens.confirm import ConfirmScreen
from gputop.tui.widgets.process_rows import (
    COLUMNS,
    JOB_MARK_STYLE,
    OWN_USER_STYLE,
    SORT_KEYS,
    ProcessRow,
    RowMaker,
    column_widths,
    shown_bytes,
)
from gputop.tui.widgets.process_table import ProcessTable

WriteScenario = Callable[..., str]
BIG = (160, 48)
SMALL = (80, 24)
HEADER = 1


def table(app: GputopApp) -> ProcessTable:
    return app.query_one(ProcessTable)


def line_text(strip: Strip) -> str:
    return "".join(segment.text for segment in strip)


def painted(table: ProcessTable, row: int) -> Strip:
    """The line showing ``row`` (which must be on screen)."""
    return table.render_line(row - round(table.scroll_offset.y) + HEADER)


async def focused(app: GputopApp, pilot: Pilot[None]) -> ProcessTable:
    """The table, once the first sample is shown and keys go to it."""
    await first_sample(pilot)
    table(app).focus()
    deadline = time.monotonic() + 10
    while not table(app).has_focus:  # focus moves through the message queue
        assert time.monotonic() < deadline, "the process table never took the focus"
        await pilot.pause(0.01)
    return table(app)


def a_second_later(app: GputopApp) -> Snapshot:
    nvml = app.backend.nvml
    nvml.set_time(nvml.now() + 1.0)
    return app.backend.sample()


# -- what the rows are ----------------------------------------------------------------------


async def test_rows_are_sorted_by_gpu_memory_largest_first() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        used = [row.process.used_memory_bytes or 0 for row in table(app).rows]
        shown = [shown_bytes(value) for value in used]
        assert len(used) > 20 and shown == sorted(shown, reverse=True)
        assert len(set(shown)) > 10  # the sizes differ: an order that means something


def _with_memory(process: GpuProcess, mib: int) -> GpuProcess:
    return dataclasses.replace(process, used_memory_bytes=mib * 1024 * 1024)


def test_rows_whose_shown_values_tie_keep_their_order_as_readings_move() -> None:
    """A reading that moves below what is shown, or past another's by less than the margin
    (5 %), never reorders the table; one that moves past it by more does."""
    maker = RowMaker("alice")
    a, b, c = (
        GpuProcess(pid=pid, physical_index=0, type=ProcessType.COMPUTE, used_memory_bytes=0)
        for pid in (11, 22, 33)
    )

    base = snapshot_of("v100x4")

    def order(*sizes_gib: float) -> list[int]:
        gpu = dataclasses.replace(
            base.gpus[0],
            processes=tuple(
                _with_memory(p, round(size * 1024))
                for p, size in zip((a, b, c), sizes_gib, strict=True)
            ),
        )
        snapshot = dataclasses.replace(base, gpus=(gpu,))
        rows = maker.rows(
            snapshot, only_gpu=None, sort_key=SORT_KEYS[0], reverse=False, job_of_pid={}
        )
        return [row.process.pid for row in rows]

    assert order(6.02, 6.04, 2.0) == [11, 22, 33]  # both show 6.0G: the order they came in
    assert order(6.04, 6.01, 2.0) == [11, 22, 33]  # 22 now less, still 6.0G: nothing moves
    assert order(6.01, 6.04, 2.0) == [11, 22, 33]
    assert order(6.0, 6.2, 2.0) == [11, 22, 33]  # 6.2G against 6.0G: 3 % more, held
    assert order(6.0, 6.4, 2.0) == [22, 11, 33]  # 6.4G: 7 % more, first
    assert order(6.03, 6.2, 2.0) == [22, 11, 33]  # within the margin again: 22 stays first
    assert order(6.0, 6.0, 7.0) == [33, 22, 11]


async def test_S_reverses_the_order_of_the_rows() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("S")
        used = [row.process.used_memory_bytes or 0 for row in table(app).rows]
        assert used == sorted(used)


async def test_a_filter_keeps_only_the_processes_of_that_gpu() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("right", "right", "f")
        gpus = {row.process.physical_index for row in table(app).rows}
        assert gpus == {2}


async def test_the_header_names_every_column_and_stays_on_top_when_scrolled() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=SMALL) as pilot:
        processes = await focused(app, pilot)
        await pilot.press("end")
        assert processes.scroll_offset.y > 0
        header = line_text(processes.render_line(0)).split()
        assert header[:4] == ["GPU", "PID", "USER", "TYPE"] and header[-1] == "COMMAND"


async def test_columns_are_as_wide_as_their_widest_cell() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        processes = table(app)
        header = line_text(processes.render_line(0))
        widest_pid = max(len(row.text(1)) for row in processes.rows)
        # " GPU " then " PID" padded to the widest pid, then " USER"
        assert header.index("USER") == header.index("PID") + widest_pid + 2


def test_a_process_reaching_100_percent_moves_no_column() -> None:
    """SM and CPU are as wide as "100%" from the start: otherwise every column right of them
    moves on every row whenever one process reaches 100 % and back (docs/speed.md)."""

    def widths_with(sm: str, cpu: str) -> tuple[int, ...]:
        texts = ["0", "4242", "alice", "C", "1.0G", sm, cpu, "8M", "1m", "python"]
        process = GpuProcess(
            pid=4242, physical_index=0, type=ProcessType.COMPUTE, used_memory_bytes=1
        )
        cells = tuple(((text, ""),) for text in texts)
        row = ProcessRow("0:4242:None", process, cells, tuple(len(text) for text in texts))
        return column_widths([row])

    assert widths_with("9%", "0%") == widths_with("100%", "100%")
    assert widths_with("100%", "1250%")[COLUMNS.index("CPU")] == 5  # wider still where needed
    assert column_widths([], ("HOST", *COLUMNS))[1:] == column_widths([])


# -- the highlight --------------------------------------------------------------------------


async def test_down_and_up_move_the_highlight_one_row() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        processes = await focused(app, pilot)
        await pilot.press("down", "down", "down", "up")
        assert processes.cursor_row == 2
        assert processes.current_process == processes.rows[2].process


async def test_end_and_home_move_the_highlight_to_the_last_and_first_row() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=SMALL) as pilot:
        processes = await focused(app, pilot)
        await pilot.press("end")
        assert processes.cursor_row == processes.row_count - 1
        await pilot.press("home")
        assert processes.cursor_row == 0 and processes.scroll_offset.y == 0


async def test_page_down_moves_a_screenful_and_keeps_the_highlight_in_view() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=SMALL) as pilot:
        processes = await focused(app, pilot)
        page = processes.scrollable_content_region.height - HEADER
        await pilot.press("pagedown", "pagedown")
        assert processes.cursor_row == 2 * page
        top = processes.scroll_offset.y
        assert top <= processes.cursor_row < top + page
        await pilot.press("pageup")
        assert processes.cursor_row == page


async def test_the_highlight_stops_at_the_first_and_last_row() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        processes = await focused(app, pilot)
        await pilot.press("up")
        assert processes.cursor_row == 0
        await pilot.press("down", "down", "down")
        assert processes.cursor_row == processes.row_count - 1 == 1


async def test_the_highlight_follows_its_process_when_the_order_changes() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        processes = await focused(app, pilot)
        await pilot.press("down", "down", "down")
        chosen = processes.current_process
        await pilot.press("S")
        assert processes.current_process == chosen
        assert processes.cursor_row == processes.row_count - 4


async def test_the_highlighted_row_is_painted_in_the_cursor_style() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        processes = await focused(app, pilot)
        cursor = processes.get_component_rich_style("process-table--cursor")
        await pilot.press("down")
        assert all(s.style and s.style.bgcolor == cursor.bgcolor for s in painted(processes, 1))
        assert not any(s.style and s.style.bgcolor == cursor.bgcolor for s in painted(processes, 0))


# -- the mouse ------------------------------------------------------------------------------


async def test_a_click_highlights_the_row_under_the_pointer() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        border = 1
        await pilot.click(ProcessTable, offset=(10, border + HEADER + 4))
        assert table(app).cursor_row == 4
        assert app.focused is table(app)


async def test_a_click_on_a_scrolled_table_highlights_the_row_shown_there() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        table(app).scroll_to(y=5, animate=False)
        await pilot.pause()
        await pilot.click(ProcessTable, offset=(10, 1 + HEADER + 2))
        assert table(app).cursor_row == 7
        assert line_text(painted(table(app), 7)).split()[1] == table(app).rows[7].text(1)


async def test_a_click_on_the_header_changes_nothing() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        processes = await focused(app, pilot)
        await pilot.press("down")
        await pilot.click(ProcessTable, offset=(10, 1))
        assert processes.cursor_row == 1


async def test_the_row_under_the_pointer_is_painted_hovered() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        processes = await focused(app, pilot)
        hover = processes.get_component_rich_style("process-table--hover")
        await pilot.hover(ProcessTable, offset=(10, 1 + HEADER + 3))
        assert any(s.style and s.style.bgcolor == hover.bgcolor for s in painted(processes, 3))
        assert not any(s.style and s.style.bgcolor == hover.bgcolor for s in painted(processes, 4))


# -- marks and highlights -------------------------------------------------------------------


async def test_the_processes_of_a_job_are_marked_in_the_job_style() -> None:
    # One sample in the test's time: a later one would show its own jobs (none) over these.
    app = make_app("v100x4", interval_s=3600.0)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        pid = table(app).rows[1].process.pid
        app._show_jobs(JobsView(job_of_pid={pid: 7}, read_number=10**9))
        await pilot.pause()
        mark, *_ = table(app).rows[1].cells[-1]
        assert mark == ("[job 7] ", JOB_MARK_STYLE)
        assert not table(app).rows[0].text(-1).startswith("[job")


async def test_your_own_processes_show_your_name_in_the_own_style() -> None:
    app = make_app("demo", user="alice")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        styles = {row.text(2): row.cells[2][0][1] for row in table(app).rows}
        assert styles["alice"] == OWN_USER_STYLE
        assert {style for user, style in styles.items() if user != "alice"} == {""}
        alice = next(i for i, row in enumerate(table(app).rows) if row.text(2) == "alice")
        (segment,) = [s for s in painted(table(app), alice) if s.text == "alice"]
        assert segment.style is not None and segment.style.bold


# -- untrusted text -------------------------------------------------------------------------

HOSTILE = [
    {"pid": 4_190_001, "used_memory_mib": 300, "user": "[red]eve[/red]", "cmd": ["[b]x[/b]"]},
    {"pid": 4_190_002, "used_memory_mib": 200, "user": "eve", "cmd": ["[@click=app.quit]X[/]"]},
    {"pid": 4_190_003, "used_memory_mib": 100, "user": "eve", "cmd": ["a\x1b]0;owned\x07", "b\nc"]},
]


async def test_markup_in_a_command_or_user_is_shown_as_written(
    scenario_file: WriteScenario,
) -> None:
    app = make_app(scenario_file([minimal_gpu(processes=HOSTILE)]))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        rows = table(app).rows
        assert [row.text(-1) for row in rows[:2]] == ["[b]x[/b]", "[@click=app.quit]X[/]"]
        assert rows[0].text(2) == "[red]eve[/red]"
        first = painted(table(app), 0)
        assert "[b]x[/b]" in line_text(first) and "[red]eve[/red]" in line_text(first)
        assert not any(s.style and s.style.bold for s in first if "x" in s.text)


async def test_a_click_on_a_command_with_click_markup_does_nothing_but_highlight(
    scenario_file: WriteScenario,
) -> None:
    app = make_app(scenario_file([minimal_gpu(processes=HOSTILE)]))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        command_x = line_text(table(app).render_line(0)).index("COMMAND") + 2
        await pilot.click(ProcessTable, offset=(command_x, 1 + HEADER + 1))
        await pilot.pause()
        assert app.is_running and table(app).cursor_row == 1
        assert all(s.style is None or not s.style.meta for s in painted(table(app), 1))


async def test_control_characters_in_a_command_show_as_escapes(
    scenario_file: WriteScenario,
) -> None:
    app = make_app(scenario_file([minimal_gpu(processes=HOSTILE)]))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert table(app).rows[2].text(-1) == "a\\e]0;owned\\x07 b\\nc"
        text = line_text(painted(table(app), 2))
        assert "a\\e]0;owned\\x07 b\\nc" in text
        assert not any(char in text for char in "\x1b\x07\n")


# -- signals act on the highlighted row -----------------------------------------------------


@pytest.fixture
def two_own_processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    children = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)
    ]
    yield children
    for child in children:
        child.kill()
        child.wait()


@pytest.mark.parametrize("key,signal_name", [("t", "SIGTERM"), ("T", "SIGKILL")])
async def test_t_and_T_ask_about_the_highlighted_process(
    scenario_file: WriteScenario,
    two_own_processes: list[subprocess.Popen[bytes]],
    key: str,
    signal_name: str,
) -> None:
    processes = [
        {"pid": child.pid, "used_memory_mib": 200 - i, "type": "C"}
        for i, child in enumerate(two_own_processes)
    ]
    app = make_app(scenario_file([minimal_gpu(processes=processes)]), user=getpass.getuser())
    async with app.run_test(size=BIG) as pilot:
        processes_table = await focused(app, pilot)
        await pilot.press("down", key)
        assert isinstance(app.screen, ConfirmScreen)
        question = app.screen._question
        assert signal_name in question and str(two_own_processes[1].pid) in question
        assert str(two_own_processes[0].pid) not in question
        assert processes_table.current_process is not None
        assert processes_table.current_process.pid == two_own_processes[1].pid


# -- repainting only what changed -----------------------------------------------------------


repaints = spy_on_refresh
"""Record each repaint the table asks for from now on."""


async def test_the_same_snapshot_again_repaints_nothing() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        asked = repaints(table(app))
        assert app.snapshot is not None
        table(app).show(app.snapshot)
        assert asked == []


async def test_a_new_snapshot_repaints_only_the_changed_lines() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        processes = table(app)
        before = [row.cells for row in processes.rows]
        asked = repaints(processes)
        processes.show(a_second_later(app))
        after = [row.cells for row in processes.rows]
        changed = {i + HEADER for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b}
        lines = {region.y for regions in asked for region in regions}
        assert len(asked) == 1  # one refresh, of the changed lines only
        assert all(region.height == 1 for regions in asked for region in regions)
        visible = processes.scrollable_content_region.height
        assert lines == {y for y in changed if y < visible}


async def test_a_moved_highlight_repaints_two_lines() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        processes = await focused(app, pilot)
        asked = repaints(processes)
        await pilot.press("down")
        lines = sorted(region.y for regions in asked for region in regions)
        assert lines == [HEADER, HEADER + 1], asked


async def test_kept_lines_are_painted_as_freshly_painted_ones() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        processes = await focused(app, pilot)
        await pilot.press("down")
        processes.show(a_second_later(app))
        await pilot.pause()
        kept = [list(processes.render_line(y)) for y in range(processes.size.height)]
        processes.notify_style_update()  # forgets every painted line
        fresh = [list(processes.render_line(y)) for y in range(processes.size.height)]
        assert kept == fresh


async def test_losing_focus_repaints_the_highlight_in_the_blurred_style() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        processes = await focused(app, pilot)
        focused_style = [s.style for s in painted(processes, 0)]
        await pilot.press("tab")
        await pilot.pause()
        assert not processes.has_focus
        blurred = processes.get_component_rich_style("process-table--cursor")
        assert [s.style for s in painted(processes, 0)] != focused_style
        assert all(s.style and s.style.bgcolor == blurred.bgcolor for s in painted(processes, 0))


async def test_the_mouse_wheel_scrolls_the_rows_under_a_fixed_header() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=SMALL) as pilot:
        processes = await focused(app, pilot)
        header = line_text(processes.render_line(0))
        for _ in range(3):
            processes.post_message(
                events.MouseScrollDown(processes, 5, 5, 0, 1, 0, False, False, False)
            )
        await pilot.pause()
        top = round(processes.scroll_offset.y)
        assert top > 0 and processes.cursor_row == 0
        assert line_text(processes.render_line(0)) == header
        assert line_text(processes.render_line(HEADER)).split()[1] == processes.rows[top].text(1)


async def test_right_and_left_scroll_only_the_command_column() -> None:
    """GPU, PID, USER and the numbers stay; the command moves (issue 28)."""
    app = make_app("dgx-h100")
    async with app.run_test(size=SMALL) as pilot:
        processes = await focused(app, pilot)
        header = line_text(processes.render_line(0))
        before = line_text(processes.render_line(HEADER))
        command_at = header.index("COMMAND")
        row = processes.rows[0]
        await pilot.press(*["right"] * 20)
        shift = round(processes.scroll_offset.x)
        assert shift > 0
        after = line_text(processes.render_line(HEADER))
        assert line_text(processes.render_line(0)) == header
        assert after[:command_at] == before[:command_at]
        assert after.split()[:3] == [row.text(0), row.text(1), row.text(2)]
        command = row.text(len(row.cells) - 1)
        assert after[command_at:].rstrip() == command[shift : shift + len(after) - command_at]
        await pilot.press(*["left"] * 20)
        assert processes.scroll_offset.x == 0
        assert line_text(processes.render_line(HEADER)) == before


async def test_wide_characters_keep_the_columns_aligned(scenario_file: WriteScenario) -> None:
    processes = [
        {"pid": 4_190_011, "used_memory_mib": 300, "user": "李雷", "cmd": ["训练.py"]},
        {"pid": 4_190_012, "used_memory_mib": 200, "user": "bob", "cmd": ["train.py"]},
    ]
    app = make_app(scenario_file([minimal_gpu(processes=processes)]))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        lines = [line_text(table(app).render_line(y)) for y in range(3)]
        starts = {cell_len(line[: line.index(" C ")]) for line in lines[1:]}
        assert starts == {cell_len(lines[0][: lines[0].index(" TYPE")])}
        assert len({cell_len(line) for line in lines}) == 1
