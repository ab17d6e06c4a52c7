"""Launching: commands split without a shell, cards resolved in the order given, bad input
refused before anything is recorded, and the job run with exactly the pinning asked for."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.jobs import (
    PYTHON,
    V100,
    all_jobs,
    launch,
    probe_command,
    read_probe,
    snapshot_of,
    supervisors_of,
    wait_until_ended,
)
from helpers.scenarios import minimal_gpu

from gputop.core.errors import UsageError
from gputop.core.jobs.command import default_name, plan_command
from gputop.core.jobs.model import RunMode
from gputop.core.jobs.store import JobStore
from gputop.core.mig_targets import resolve_gpus
from gputop.core.sampling.source import open_backend

BASH = {"SHELL": "/bin/bash"}


# --- the command -----------------------------------------------------------------------------


def test_a_plain_command_is_split_and_run_without_a_shell() -> None:
    plan = plan_command("python train.py --name 'my run'", BASH)
    assert plan.argv == ("python", "train.py", "--name", "my run")
    assert not plan.uses_shell
    assert plan.display == "python train.py --name 'my run'"


@pytest.mark.parametrize(
    "text",
    [
        "python a.py | tee log",
        "python a.py > out.txt",
        "make && python a.py",
        "python a.py; echo done",
        "python *.py",
        "echo $HOME",
        'echo "$HOME"',
        "echo `date`",
        "(cd x; python a.py)",
        "CUDA_LAUNCH_BLOCKING=1 python a.py",
        "ls ~/data",
    ],
)
def test_shell_syntax_runs_under_the_users_shell(text: str) -> None:
    plan = plan_command(text, BASH)
    assert plan.uses_shell
    assert plan.argv == ("/bin/bash", "-c", text)


@pytest.mark.parametrize("text", ["python a.py '|' x", "echo 'it costs $5'", r"echo a\;b"])
def test_quoted_shell_characters_need_no_shell(text: str) -> None:
    assert not plan_command(text, BASH).uses_shell


def test_without_shell_set_the_shell_is_bin_sh() -> None:
    assert plan_command("a | b", {}).argv[0] == "/bin/sh"


def test_an_argv_is_run_as_given_never_under_a_shell() -> None:
    plan = plan_command(["python", "a.py", "|", "$HOME"], BASH)
    assert plan.argv == ("python", "a.py", "|", "$HOME") and not plan.uses_shell


def test_a_single_argument_holding_a_command_line_is_read_as_one() -> None:
    assert plan_command(["python a.py | tee log"], BASH).uses_shell
    assert plan_command(["python a.py --lr 3"], BASH).argv == ("python", "a.py", "--lr", "3")


@pytest.mark.parametrize("command", ["", "   ", [], [""]])
def test_an_empty_command_is_refused(command: str | list[str]) -> None:
    with pytest.raises(UsageError, match="The command is empty"):
        plan_command(command, BASH)


def test_a_bad_quote_is_refused_with_the_reason() -> None:
    with pytest.raises(UsageError, match=r"no closing quotation.*check its quotes"):
        plan_command("python a.py 'unfinished", BASH)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("python -u train.py --lr 3", "train.py"),
        ("torchrun --nproc_per_node 2 scripts/train.py", "train.py"),
        ("python -m pkg.main", "pkg.main"),
        ("cd /data && python prep.py | tee log", "prep.py"),
        ("./run.sh", "run.sh"),
        ("sleep 5", "sleep"),
    ],
)
def test_the_default_name_is_the_script(text: str, name: str) -> None:
    assert default_name(plan_command(text, BASH)) == name


# --- the cards -------------------------------------------------------------------------------


def test_gpus_keep_the_order_given() -> None:
    assert resolve_gpus(snapshot_of(), ["3,1"]) == [3, 1]
    assert resolve_gpus(snapshot_of(), ["2", "0"]) == [2, 0]


def test_gpus_can_be_named_by_uuid_prefix_with_or_without_gpu() -> None:
    assert resolve_gpus(snapshot_of(), ["GPU-80af,96870f72"]) == [3, 1]


def test_an_unknown_index_names_it_and_lists_the_gpus() -> None:
    with pytest.raises(UsageError, match=r"There is no GPU 7\. This machine has GPUs 0 "):
        resolve_gpus(snapshot_of(), ["0,7"])


def test_an_unknown_uuid_prefix_is_refused() -> None:
    with pytest.raises(UsageError, match="No GPU has an index or UUID starting with 'GPU-dead'"):
        resolve_gpus(snapshot_of(), ["GPU-dead"])


def test_an_ambiguous_uuid_prefix_lists_the_matches(
    scenario_file: Callable[..., str],
) -> None:
    path = scenario_file(
        [
            minimal_gpu(uuid="GPU-abc11111-0000-0000-0000-000000000000"),
            minimal_gpu(
                uuid="GPU-abc22222-0000-0000-0000-000000000000", pci_bus_id="00000000:08:00.0"
            ),
        ]
    )
    backend = open_backend(path, environ={"GPUTOP_FAKE_TIME": "30"})
    try:
        snapshot = backend.sample()
    finally:
        backend.close()
    with pytest.raises(UsageError, match=r"'abc' is ambiguous: it matches GPU 0 .* and GPU 1"):
        resolve_gpus(snapshot, ["abc"])


def test_a_gpu_given_twice_is_refused() -> None:
    with pytest.raises(UsageError, match=r"GPU 3 is given twice \('3' and 'GPU-80af'\)"):
        resolve_gpus(snapshot_of(), ["3,GPU-80af"])


def test_an_empty_gpu_entry_is_refused() -> None:
    with pytest.raises(UsageError, match="empty entry"):
        resolve_gpus(snapshot_of(), ["0,,1"])


# --- launching -------------------------------------------------------------------------------


def test_a_missing_working_directory_launches_nothing(state_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"working directory .*nowhere does not exist"):
        launch(state_dir, ["true"], cwd=str(tmp_path / "nowhere"))
    assert all_jobs(state_dir) == []
    assert supervisors_of(state_dir) == []


def test_a_file_as_working_directory_launches_nothing(state_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="is not a directory"):
        launch(state_dir, ["true"], cwd=str(tmp_path / "f"))
    assert all_jobs(state_dir) == []


def test_tmux_mode_outside_tmux_launches_nothing(state_dir: Path) -> None:
    with pytest.raises(UsageError, match="not running inside tmux"):
        launch(state_dir, ["true"], mode=RunMode.TMUX)
    assert all_jobs(state_dir) == []
    assert supervisors_of(state_dir) == []


def test_a_job_sees_exactly_its_cards_in_the_order_given(state_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    job = launch(state_dir, probe_command(out), gpus=(3, 1), cwd=str(tmp_path))
    report = read_probe(out)
    assert report["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert report["env"]["CUDA_VISIBLE_DEVICES"] == f"{V100[3]},{V100[1]}"
    assert report["env"]["GPUTOP_JOB_ID"] == str(job.id)
    assert report["cwd"] == str(tmp_path)
    assert job.physical_indices == (3, 1) and job.uuids == (V100[3], V100[1])


def test_a_job_runs_in_its_own_session_without_a_terminal(state_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    job = launch(state_dir, probe_command(out))
    report = read_probe(out)
    assert report["sid"] == report["pid"] == report["pgid"]
    assert report["sid"] != os.getsid(0)
    assert not report["stdin_is_tty"]
    assert report["sighup_default"]  # not left ignored by the supervisor
    assert wait_until_ended(state_dir, job.id).pid == report["pid"]


def test_the_job_log_holds_its_output(state_dir: Path, tmp_path: Path) -> None:
    job = launch(state_dir, probe_command(tmp_path / "p.json", "--say", "hello from the job"))
    wait_until_ended(state_dir, job.id)
    text = Path(job.log_path).read_text()
    assert "hello from the job" in text
    assert f"job {job.id} exited 0" in text


def test_a_shell_command_runs_under_the_shell(state_dir: Path, tmp_path: Path) -> None:
    job = launch(state_dir, f"echo piped | tr a-z A-Z > {tmp_path}/shouted", cwd=str(tmp_path))
    assert job.uses_shell
    assert wait_until_ended(state_dir, job.id).status_text == "exited 0"
    assert (tmp_path / "shouted").read_text() == "PIPED\n"


def test_a_program_that_does_not_exist_ends_with_127_and_says_why(state_dir: Path) -> None:
    job = launch(state_dir, ["no-such-program-gputop", "x"])
    ended = wait_until_ended(state_dir, job.id)
    assert ended.status_text == "failed 127"
    assert ended.note == "no-such-program-gputop: command not found"
    assert "no-such-program-gputop: command not found" in Path(job.log_path).read_text()


def test_a_launch_is_remembered_in_the_history(state_dir: Path) -> None:
    launch(state_dir, f"{PYTHON} -c pass")
    with JobStore.open(state_dir) as store:
        assert store.history() == [f"{PYTHON} -c pass"]
