"""Hostile text in the CLI outputs: shown as visible escapes, one line per row, JSON raw.

Also the properties: whatever the text (process names, users, commands, job names, GPU
names, host names), no rendering of it holds a control character from it. See
docs/security.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from helpers.hostile import (
    HOSTILE,
    OSC0,
    add_job,
    controls_left,
    hostile_scenario,
    rendered,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.text import Text

from gputop.cli.jobs_command import render_table, stop_question
from gputop.cli.main import main
from gputop.cli.snapshot_text import render_snapshot
from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.model import GpuProcess, GpuSample, ProcessOrigin, ProcessType, Snapshot
from gputop.tui.widgets.gpu_card import CardView, _lines_for, _title
from gputop.tui.widgets.jobs_panel import job_cells

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
