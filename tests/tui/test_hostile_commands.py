"""A command is never a shell by accident: a file named like a command line runs as that file.

A script that calls ``gputop run -- "$file"`` must not be made to run a shell through the
name of a file (``train;touch INJECTED``). The shell is used only when the text needs one
and no file of that name exists; the preview (dialog) and ``gputop run`` say which. See
docs/security.md, "A command is never a shell by accident".
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from helpers.dashboard import launch, make_app, open_launch_dialog, preview_text
from helpers.jobs import wait_until_ended
from helpers.waiting import pilot_wait_for
from textual.widgets import Input

from gputop.cli.main import main
from gputop.core.jobs.command import plan_command
from gputop.tui.screens.launch import LaunchScreen

HOSTILE_NAME = "train;touch INJECTED"
BIG = (160, 48)


def make_script(directory: Path, name: str = HOSTILE_NAME) -> Path:
    """An executable file with a hostile name: it writes RAN beside itself when it runs."""
    script = directory / name
    script.write_text('#!/bin/sh\necho ran > "$(dirname "$0")/RAN"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.parametrize(
    "name",
    [HOSTILE_NAME, "a|b", "x && rm -rf y", "$(id)", "`id`", "a > b", "my script"],
)
def test_a_single_argument_naming_a_file_runs_that_file(tmp_path: Path, name: str) -> None:
    make_script(tmp_path, name)
    for given in (name, f"./{name}", str(tmp_path / name)):
        plan = plan_command([given], {"SHELL": "/bin/bash"}, str(tmp_path))
        assert not plan.uses_shell
        assert len(plan.argv) == 1 and (tmp_path / plan.argv[0]).resolve() == tmp_path / name
        assert plan.note is not None and "never a shell" in plan.note
        typed = plan_command(given, {"SHELL": "/bin/bash"}, str(tmp_path))  # the dialog's text
        assert typed.argv == plan.argv and not typed.uses_shell


def test_without_such_a_file_the_text_needs_a_shell_and_says_so(tmp_path: Path) -> None:
    plan = plan_command([f"./{HOSTILE_NAME}"], {"SHELL": "/bin/bash"}, str(tmp_path))
    assert plan.uses_shell and plan.argv == ("/bin/bash", "-c", f"./{HOSTILE_NAME}")
    assert plan.note is None


def test_a_file_is_looked_for_in_the_jobs_working_directory_not_gputops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_dir, elsewhere = tmp_path / "job", tmp_path / "elsewhere"
    job_dir.mkdir()
    elsewhere.mkdir()
    make_script(job_dir)
    monkeypatch.chdir(elsewhere)
    assert not plan_command([HOSTILE_NAME], {}, str(job_dir)).uses_shell
    assert plan_command([HOSTILE_NAME], {}, str(elsewhere)).uses_shell


def test_another_hosts_files_are_not_looked_for_here(tmp_path: Path) -> None:
    """The lab's dialog for another host: that host's gputop decides (it gets the text as
    one argument); a file of this machine must not make the preview claim "no shell"."""
    make_script(tmp_path)
    plan = plan_command(f"./{HOSTILE_NAME}", {}, str(tmp_path), look_for_file=False)
    assert plan.uses_shell and plan.note is None
    assert not plan_command(f"./{HOSTILE_NAME}", {}, str(tmp_path)).uses_shell


def test_gputop_run_runs_the_file_and_no_shell_runs_its_name(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_script(tmp_path)
    argv = ["run", "--fake", "v100x4", "--gpus", "1", "--cwd", str(tmp_path), "--"]
    assert main([*argv, f"./{HOSTILE_NAME}"]) == 0
    printed = capsys.readouterr().out
    assert f"runs: './{HOSTILE_NAME}'" in printed  # said before anything else happens
    assert "never a shell" in printed and "-c" not in printed
    ended = wait_until_ended(state_dir, 1)
    assert ended.exit_code == 0 and not ended.uses_shell
    assert (tmp_path / "RAN").read_text() == "ran\n"
    assert not (tmp_path / "INJECTED").exists()
    assert not Path("INJECTED").exists()


def test_gputop_run_with_no_such_file_says_it_needs_a_shell(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--fake", "v100x4", "--gpus", "1", "--cwd", str(tmp_path), "--"]
    assert main([*argv, "true; touch SHELL-RAN"]) == 0
    assert "(it needs a shell)" in capsys.readouterr().out
    assert wait_until_ended(state_dir, 1).uses_shell
    assert (tmp_path / "SHELL-RAN").exists()  # asked for in words: a shell, said so


async def test_the_launch_dialog_previews_and_runs_the_file(
    state_dir: Path, tmp_path: Path
) -> None:
    make_script(tmp_path)
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        screen = await open_launch_dialog(app, pilot, "right")
        screen.query_one("#cwd", Input).value = str(tmp_path)
        screen.query_one("#command", Input).value = f"./{HOSTILE_NAME}"

        def previewed() -> bool:
            """the preview says it runs the file, not under a shell"""
            return "never a shell" in preview_text(app)

        await pilot_wait_for(pilot, previewed)
        shown = preview_text(app)
        assert f"Runs: './{HOSTILE_NAME}'" in shown and "under a shell" not in shown
        await launch(app, pilot, f"./{HOSTILE_NAME}", tmp_path)
        await pilot_wait_for(pilot, lambda: not isinstance(app.screen, LaunchScreen))
    ended = wait_until_ended(state_dir, 1)
    assert ended.exit_code == 0 and not ended.uses_shell
    assert ended.command == (f"./{HOSTILE_NAME}",)
    assert (tmp_path / "RAN").read_text() == "ran\n"
    assert not (tmp_path / "INJECTED").exists()
