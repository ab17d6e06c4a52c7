"""The command line is parsed by the named command's parser alone where it can be, and by
the whole parser otherwise, with the same result (gputop/cli/main.py, ``_parse``)."""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys

import pytest
from helpers.start_imports import loaded_at_start

from gputop.cli.main import COMMAND_MODULES, _parse, build_parser


def test_the_table_of_commands_is_what_the_modules_add() -> None:
    for name, module in COMMAND_MODULES.items():
        parser = argparse.ArgumentParser(add_help=False)
        commands = parser.add_subparsers()
        importlib.import_module(module).add_parser(
            commands, argparse.ArgumentParser(add_help=False)
        )
        assert list(commands.choices) == [name]


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--since", "7d", "--by", "gpu", "--json"],
        ["--fake", "demo", "snapshot", "--json"],
        ["--interval", "2", "snapshot"],  # a dashboard option before the command
        ["--hosts", "report", "report"],  # a host named like a command
        ["jobs", "log", "3"],
        ["run", "--gpus", "0", "--", "python", "train.py", "--lr", "3e-4"],
        ["--fake", "demo", "--interval", "2"],  # the dashboard: its own options alone
        [],
        ["--interval", "1", "snapshot"],  # a command after a value: the whole parser
    ],
)
def test_a_command_line_parses_as_the_whole_parser_parses_it(argv: list[str]) -> None:
    quick = vars(_parse(argv))
    whole = vars(build_parser().parse_args(argv))
    assert quick.keys() <= whole.keys()
    assert {key: whole[key] for key in quick} == quick
    assert quick["run"] == whole["run"]


def test_a_mistake_is_told_by_the_whole_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse(["report", "--by", "team"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("usage: gputop report")
    assert "argument --by: invalid choice: 'team'" in error


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["snapshot", "--jsno"], "usage: gputop snapshot"),
        (["--fake", "demo", "snapshot", "--jsno"], "usage: gputop snapshot"),
        (["jobs", "log", "3", "--follw"], "usage: gputop jobs log"),
        (["report", "--by", "gpu", "extra"], "usage: gputop report"),
    ],
)
def test_an_option_a_command_does_not_take_is_told_with_that_commands_usage(
    argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``snapshot --jsno`` printed the top-level usage (the dashboard's options and COMMAND),
    which says nothing of snapshot's own (issue 40)."""
    with pytest.raises(SystemExit) as exited:
        _parse(argv)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith(usage), error
    assert f"error: unrecognized arguments: {argv[-1]}" in error


def test_the_dashboards_command_line_imports_no_other_commands_module() -> None:
    """No command named: the dashboard's parser alone, so its first frame waits for no
    other command's module (docs/speed.md, "The first frame"); --help still lists them."""
    code = (
        "import sys\n"
        "from gputop.cli.main import COMMAND_MODULES, _parse\n"
        "_parse(['--fake', 'demo', '--interval', '2'])\n"
        "print(','.join(m for m in COMMAND_MODULES.values() if m in sys.modules) or 'none')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip().splitlines()[-1] == "none", done.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "gputop", "--help"], capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0 and "snapshot" in helped.stdout and "report" in helped.stdout


def test_the_dashboard_imports_what_launches_and_stops_jobs_only_when_used() -> None:
    """The launch dialog, the launchers, Slurm's submission and package metadata are not
    imported before the dashboard's first frame (docs/speed.md, "The first frame"), nor what
    reads Slurm (before the first read, never without Slurm) or signs in to Prometheus, nor
    the job log, confirmation and help screens; the
    tests that launch from the dashboard or read Slurm show they still come when asked for."""
    later = (
        "gputop.tui.screens.launch",
        "gputop.core.jobs.launch",
        "gputop.core.slurm.submit",
        "importlib.metadata",
        "gputop.core.slurm.queue",
        "gputop.core.slurm.node",
        "gputop.core.slurm.sync",
        "gputop.core.slurm.commands",
        "gputop.core.prometheus.auth",
        "gputop.tui.screens.job_log",
        "gputop.tui.screens.confirm",
        "gputop.tui.screens.help",
    )
    assert loaded_at_start(later) == []


def test_the_dashboard_imports_what_jobs_launches_probes_and_slurm_jobs_need_when_used() -> None:
    """What words a job's start or end (the toasts and ``--notify-command``) comes with the
    first read that has jobs, and only the commands that take ``--notify-command`` import it
    for their help; the job logs' reader with the first job shown; the cards' names for a
    launch (``mig_targets``) with the first card selected or job started after waiting; the
    torch probe with the first probe, after the first frame; the PyTorch view's account of a
    Slurm allocation only inside a Slurm job. None before the dashboard's first frame
    (docs/speed.md, "The first frame"); the tests of the job toasts, the jobs panel, the
    launch preview, waiting jobs, the probes and the dashboard in a Slurm job show they still
    come when used."""
    later = (
        "gputop.core.jobs.notify",
        "gputop.core.jobs.logs",
        "gputop.core.mig_targets",
        "gputop.core.probes.torch_probe",
        "gputop.core.slurm.allocation",
    )
    assert loaded_at_start(later, parse=["--fake", "demo"]) == []


def test_a_dashboard_mistake_is_told_by_the_whole_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse(["--interval", "fast"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("usage: gputop [-h]") and "COMMAND" in error


def test_report_imports_neither_the_dashboard_nor_the_sampling() -> None:
    code = (
        "import sys\n"
        "from gputop.cli.main import main\n"
        "main(['report', '--db', '/nonexistent/history.sqlite3'])\n"
        "loaded = [m for m in ('gputop.cli.dashboard', 'gputop.core.sampling.source', "
        "'textual', 'pynvml') if m in sys.modules]\n"
        "print(','.join(loaded) or 'none')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip().splitlines()[-1] == "none", done.stderr
    assert "No history store at /nonexistent/history.sqlite3" in done.stderr


@pytest.mark.parametrize("command", ["", *COMMAND_MODULES])
def test_every_commands_help_fits_an_80_column_terminal(command: str) -> None:
    """argparse wraps options to the terminal; a raw description or example that does not
    fit runs off the side of an 80-column terminal (run's was one 215-character line)."""
    helped = subprocess.run(
        [sys.executable, "-m", "gputop", *([command] if command else []), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert helped.returncode == 0, helped.stderr
    wide = [line for line in helped.stdout.splitlines() if len(line) > 80]
    assert not wide, "\n".join(wide)
