"""Hostile text from outside gputop: shown as written, never obeyed, never read as markup.

Any user's process names, job names and commands, log lines and scenario strings reach the
screen. None of them may write to the terminal (OSC 52 sets the clipboard, OSC 0 the title,
``ESC[2J`` clears the screen, a newline forges a row), and none may be read as Textual or
Rich markup (``exp[/]1`` raises, ``[fast]`` vanishes, ``[@click=app.quit]`` is an action).
See docs/security.md. The real-terminal cases are in test_hostile_terminal.py.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import minimal_gpu
from dashboard_helpers import first_sample, make_app, plain_text
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import Input, Static
from textual.widgets._toast import Toast

from gputop.cli.jobs_command import render_table, stop_question
from gputop.cli.main import main
from gputop.cli.snapshot_text import render_snapshot
from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.jobs.store import JobStore
from gputop.core.model import (
    GpuProcess,
    GpuSample,
    ProcessOrigin,
    ProcessType,
    Snapshot,
)
from gputop.tui.app import GputopApp
from gputop.tui.screens.confirm import ConfirmScreen
from gputop.tui.screens.job_log import JobLogScreen
from gputop.tui.widgets.gpu_card import CardView, _lines_for, _title
from gputop.tui.widgets.jobs_panel import JobsPanel, job_cells

OSC52 = "\x1b]52;c;aGVsbG8gY2xpcGJvYXJk\x07"
OSC0 = "\x1b]0;pwned-title\x07"
CLEAR = "\x1b[2J"
HOSTILE = f"{OSC52}{OSC0}{CLEAR}[/]\nforged row\r\x9b2J\u202e"
"""Every kind of trouble at once: terminal commands, markup, a newline, C1, a bidi override."""
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
RICH_SGR = re.compile("\x1b\\[[0-9;]*m")
BIG = (160, 48)
V100_1 = "GPU-96870f72-ff47-4de2-1bb0-99f7d8338c12"


def controls_left(rendered: str) -> list[str]:
    """Control characters in a rendering, once the renderer's own colours and line breaks
    are taken out: anything left came from the data."""
    return CONTROL.findall(RICH_SGR.sub("", rendered).replace("\n", ""))


def drawn_controls(output: str, rows: int) -> list[str]:
    """Control characters in what Textual writes for a screen, besides its own colours,
    cursor moves and the line breaks between the screen's rows."""
    assert output.count("\n") < rows, "more line breaks than the screen has rows"
    return CONTROL.findall(re.sub("\x1b\\[[0-9;]*[mH]", "", output).replace("\n", ""))


def rendered(*renderables: object, width: int = 200) -> str:
    """What Rich writes to a colour terminal for these renderables."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system="truecolor")
    for renderable in renderables:
        console.print(renderable)
    return out.getvalue()


def add_job(name: str, command: list[str], *, started_pid: int | None = None) -> Job:
    store = JobStore.open()
    try:
        job = store.create_job(
            name=name,
            command=command,
            command_text=" ".join(command),
            uses_shell=False,
            cwd="/tmp",
            physical_indices=[1],
            uuids=[V100_1],
            env={"CUDA_VISIBLE_DEVICES": V100_1},
        )
        return store.get(job.id)
    finally:
        store.close()


def screen_text(app: GputopApp) -> str:
    """The whole screen as text, the way the compositor will draw it."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


def terminal_bytes(app: GputopApp) -> str:
    """Exactly what Textual would write to the terminal for the current screen."""
    return app.screen._compositor.render_full_update().render_segments(app.console)


async def wait_until(pilot: Pilot[None], condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def hostile_scenario(write: Callable[..., str], **gpu: object) -> str:
    return write(
        [minimal_gpu(name=f"NVIDIA {HOSTILE}", **gpu)],
        description=f"desc {HOSTILE}",
        hostname=f"host{HOSTILE}",
        driver_version=f"550.{HOSTILE}",
    )


# -- markup: the cases, in the dashboard ----------------------------------------------


async def test_a_job_named_like_markup_does_not_stop_the_dashboard_from_starting() -> None:
    add_job("exp[/]1", ["python", "train.py"])
    add_job("sweep[seed=1]", ["python", "sweep.py"])
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("J")
        panel = app.query_one(JobsPanel)
        await wait_until(pilot, lambda: panel.row_count == 2, "both jobs in the panel")
        await pilot.pause()
        shown = screen_text(app)
        assert "exp[/]1" in shown
        assert "sweep[seed=1]" in shown


async def test_a_click_action_in_a_job_name_is_text_not_an_action() -> None:
    add_job("[@click=app.quit]X[/]", ["python", "[@click=app.quit]Y[/]"])
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("J")
        panel = app.query_one(JobsPanel)
        await wait_until(pilot, lambda: panel.row_count == 1, "the job in the panel")
        await pilot.pause()
        assert "[@click=app.quit]X[/]" in screen_text(app)
        strips = panel.render_lines(Region(0, 0, panel.size.width, panel.size.height))
        actions = [
            segment.style.meta
            for strip in strips
            for segment in strip
            if segment.style is not None and "@click" in segment.style.meta
        ]
        assert actions == []
        await pilot.click(JobsPanel, offset=(8, 2))  # on the name
        assert app.is_running


async def test_the_stop_dialog_shows_a_command_with_brackets_as_written() -> None:
    add_job("lr-sweep", ["python", "train.py", "[lr=3e-4]", "[fast]"])
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        panel = app.query_one(JobsPanel)
        await wait_until(pilot, lambda: panel.current_job is not None, "the job in the panel")
        await pilot.press("J", "K")  # J shows the jobs and focuses them
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        question = plain_text(app.screen.query_one("#question", Static), width=200)
        assert "python train.py [lr=3e-4] [fast]" in question
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmScreen)


async def test_the_terminate_dialog_names_the_command_with_its_brackets(
    scenario_file: Callable[..., str],
) -> None:
    process = {
        "pid": 3999999,
        "used_memory_mib": 100,
        "type": "C",
        "user": "alice",
        "cmd": ["python", "bench.py", "[fast]", "[lr=3e-4]", "[@click=app.quit]Z[/]"],
    }
    app = make_app(scenario_file([minimal_gpu(processes=[process])]))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("tab")
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        question = plain_text(app.screen.query_one("#question", Static), width=200)
        assert "Send SIGTERM to process 3999999 on GPU 0?" in question
        assert "python bench.py [fast] [lr=3e-4] [@click=app.quit]Z[/]" in question
        await pilot.press("n")


async def test_notifications_quote_data_as_plain_text() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG, notifications=True) as pilot:
        await first_sample(pilot)
        app.notify(f"Job 3 (exp[/]1 {OSC0}) launched")  # would raise as markup
        await wait_until(pilot, lambda: bool(app.screen.query(Toast)), "the notification")
        shown = app.screen.query_one(Toast).render().plain
        assert "Job 3 (exp[/]1 \\e]0;pwned-title\\x07) launched" in shown


# -- control characters: nothing from the data reaches the terminal ---------------------------


async def test_hostile_scenario_strings_are_drawn_as_visible_escapes(
    scenario_file: Callable[..., str],
) -> None:
    app = make_app(hostile_scenario(scenario_file))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.pause()
        assert drawn_controls(terminal_bytes(app), BIG[1]) == []
        assert "host\\e]52;c;aGVsbG8gY2xpcGJvYXJk\\x07" in screen_text(app)


async def test_a_job_log_keeps_its_colours_and_shows_other_escapes_as_text() -> None:
    job = add_job("coloured", ["python", "train.py"])
    with open(job.log_path, "wb") as log:
        log.write(b"\x1b[31mred text\x1b[0m " + OSC52.encode() + b"\n")
        log.write(b"epoch 1 " + CLEAR.encode() + OSC0.encode() + b"\n")
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        app.push_screen(JobLogScreen(job))
        await wait_until(pilot, lambda: "epoch 1" in screen_text(app), "the log's lines")
        assert drawn_controls(terminal_bytes(app), BIG[1]) == []
        shown = screen_text(app)
        assert "red text \\e]52;c;aGVsbG8gY2xpcGJvYXJk\\x07" in shown
        assert "epoch 1 \\e[2J\\e]0;pwned-title\\x07" in shown
        strips = app.screen._compositor.render_strips()
        red = [
            segment
            for strip in strips
            for segment in strip
            if "red text" in segment.text and segment.style and segment.style.color
        ]
        assert red, "the red text has a colour"
        colour = red[0].style.color.get_truecolor()
        assert colour.red > 2 * max(colour.green, colour.blue)  # the theme's red


# -- the same in the CLI ----------------------------------------------------------------------


def test_snapshot_text_shows_every_hostile_field_as_escapes_on_its_own_line(
    scenario_file: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    process = {"pid": 3999999, "used_memory_mib": 10, "type": "C"}
    path = hostile_scenario(
        scenario_file, processes=[{**process, "user": f"bob{HOSTILE}", "cmd": ["py", HOSTILE]}]
    )
    assert main(["snapshot", "--fake", path]) == 0
    out = capsys.readouterr().out
    assert controls_left(out) == []
    lines = out.splitlines()
    assert len(lines) == 4  # header, GPU, process header, the process: no forged row
    assert lines[0].startswith("host\\e]52;c;aGVsbG8gY2xpcGJvYXJk\\x07\\e]0;pwned-title")
    assert "py \\e]52;c;" in lines[3] and "\\nforged row\\r\\x9b2J\\u202e" in lines[3]


def test_snapshot_json_keeps_the_raw_data_as_strict_json(
    scenario_file: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    process = {"pid": 3999999, "used_memory_mib": 10, "type": "C", "cmd": ["py", HOSTILE]}
    assert (
        main(["snapshot", "--json", "--fake", hostile_scenario(scenario_file, processes=[process])])
        == 0
    )
    out = capsys.readouterr().out
    assert "\x1b" not in out  # JSON escapes control characters itself

    def no_constant(name: str) -> None:
        raise AssertionError(f"not strict JSON: {name}")

    document = json.loads(out, parse_constant=no_constant)
    assert document["host"] == f"host{HOSTILE}"
    assert document["gpus"][0]["processes"][0]["command"] == ["py", HOSTILE]


def test_jobs_table_and_stop_question_show_names_as_escapes() -> None:
    job = add_job(f"exp{HOSTILE}", ["python", "x.py"])
    table = render_table([job], time.time())
    assert controls_left(table) == []
    assert len(table.splitlines()) == 2
    assert "exp\\e]52;c;" in table
    question = stop_question(job)
    assert controls_left(question) == [] and "\\e]0;pwned-title" in question


def test_map_text_shows_a_hostile_gpu_name_as_escapes(
    scenario_file: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = hostile_scenario(scenario_file)
    assert main(["map", "--fake", path, "--no-torch", "--visible", "0"]) == 0
    out = capsys.readouterr().out
    assert controls_left(out) == []
    assert "NVIDIA \\e]52;c;" in out


def test_an_error_quoting_data_is_one_clean_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "--fake", f"/nonexistent/{OSC0}.json"]) != 0
    err = capsys.readouterr().err
    assert controls_left(err) == [] and len(err.splitlines()) == 1
    assert "\\e]0;pwned-title\\x07" in err
    assert "Traceback" not in err


# -- the property: whatever the text, no control byte from it is rendered ---------------------

anything = st.text(min_size=1, max_size=40)


def _process(user: str, command: str, pid: int) -> GpuProcess:
    return GpuProcess(
        pid=pid,
        physical_index=0,
        type=ProcessType.COMPUTE,
        used_memory_bytes=1 << 20,
        origin=ProcessOrigin.HOST,
        user=user,
        command=("python", command),
    )


def _snapshot(host: str, name: str, processes: tuple[GpuProcess, ...]) -> Snapshot:
    gpu = GpuSample(
        physical_index=0, uuid=f"GPU-{name}", name=name, pci_bus_id=None, processes=processes
    )
    return Snapshot(
        host=host,
        driver_version=name,
        cuda_driver_version=12040,
        nvml_version=None,
        timestamp=30.0,
        gpus=(gpu,),
        simulated=host,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(host=anything, name=anything, user=anything, command=anything)
def test_no_control_character_of_any_text_reaches_snapshot_output(
    host: str, name: str, user: str, command: str
) -> None:
    processes = (_process(user, command, 11), _process(command, user, 12))
    out = render_snapshot(_snapshot(host, name, processes))
    assert controls_left(out) == []
    assert len(out.split("\n")) == 5  # header, GPU, process header, two processes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=anything, last_line=anything, note=anything)
def test_no_control_character_of_any_text_reaches_jobs_output(
    name: str, last_line: str, note: str
) -> None:
    job = Job(
        id=7,
        name=name,
        command=("python", last_line),
        command_text=f"python {last_line}",
        uses_shell=False,
        cwd=note,
        physical_indices=(0,),
        uuids=("GPU-x",),
        env={},
        mode=RunMode.DETACHED,
        state=JobState.LOST,
        log_path=f"/nonexistent/{note}",
        created_at=0.0,
        note=note,
    )
    table = render_table([job], 30.0)
    assert controls_left(table) == [] and len(table.split("\n")) == 2
    assert controls_left(stop_question(job)) == []
    assert controls_left(rendered(*job_cells(job, last_line, 30.0))) == []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=anything, compact=st.booleans())
def test_no_control_character_of_any_gpu_name_reaches_a_card(name: str, compact: bool) -> None:
    gpu = _snapshot("h", name, ()).gpus[0]
    view = CardView(gpu=gpu, history=(1, 2), highlighted=True, selected=False, compact=compact)
    _, lines, _ = _lines_for(view, 60)
    assert controls_left(rendered(*lines, Text(_title(view)))) == []


def test_the_property_checks_would_catch_a_raw_control_character() -> None:
    """The checker itself: a raw ESC in a rendering is found (so the properties can fail)."""
    assert controls_left(rendered(Text("a\x1b]0;t\x07b"))) != []
    assert controls_left(rendered(Text.from_markup("[red]ok[/red]"))) == []


async def _dashboard_output(scenario: str, state_dir: Path, job_name: str) -> tuple[str, str]:
    """What Textual writes for the whole dashboard, jobs shown, and the screen as text."""
    app = make_app(scenario, state_dir=state_dir)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("J")
        panel = app.query_one(JobsPanel)
        await wait_until(pilot, lambda: panel.row_count == 1, "the job in the panel")
        await pilot.pause()
        return terminal_bytes(app), screen_text(app)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.text(st.characters(codec="utf-8"), min_size=1, max_size=30))
@example(text=HOSTILE)
def test_no_control_character_of_any_text_reaches_the_dashboard(text: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        scenario = root / "scenario.json"
        gpu = minimal_gpu(name=f"NVIDIA {text}")
        document = {
            "description": text,
            "hostname": text,
            "driver_version": "550.1",
            "cuda_driver_version": 12040,
            "gpus": [gpu],
        }
        scenario.write_text(json.dumps(document))
        store = JobStore.open(root / "state")
        try:
            store.create_job(
                name=text,
                command=["python", text],
                command_text=f"python {text}",
                uses_shell=False,
                cwd=directory,
                physical_indices=[0],
                uuids=[gpu["uuid"]],
                env={},
            )
        finally:
            store.close()
        output, _ = asyncio.run(_dashboard_output(str(scenario), root / "state", text))
        assert drawn_controls(output, BIG[1]) == []


async def test_a_hostile_working_directory_is_shown_cleaned_and_used_as_it_is(
    tmp_path: Path,
) -> None:
    directory = tmp_path / f"runs{OSC0}"
    directory.mkdir()
    app = make_app("v100x4", cwd=str(directory))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("l")
        await pilot.pause()
        assert drawn_controls(terminal_bytes(app), BIG[1]) == []
        assert "runs\\e]0;pwned-title\\x07" in screen_text(app)
        app.screen.query_one("#command", Input).value = "true"
        await pilot.press("enter")

        def recorded() -> list[Job]:
            store = JobStore.open()
            try:
                return store.list_jobs()
            finally:
                store.close()

        await wait_until(pilot, lambda: bool(recorded()), "the launched job")
        (job,) = recorded()
        assert job.cwd == str(directory)
