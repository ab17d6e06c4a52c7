"""What a Slurm job used: ``gputop run --slurm`` jobs on the real one-node cluster
(tests/helpers/slurm_cluster.py), measured on their node by gputop's usage wrapper on simulated
cards (docs/slurm.md, "What a Slurm job used").

Slurm gives each job a card by index (``SLURM_JOB_GPUS``); the job's command pins itself
to that simulated card by UUID and ``exec``'s itself, so the fake lists the batch step's own
process on the card (docs/scenario.md, "Jobs on simulated cards") with the usage profile.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers.slurm_cli import POLL_S, gputop, jobs_json
from helpers.slurm_cluster import SlurmCluster
from helpers.usage import scenario_file
from helpers.waiting import wait_for

from gputop.core.jobs.usage import CardUsage, JobUsage, usage_note_from_text
from gputop.core.slurm.submit import batch_script, node_meter
from gputop.core.slurm.usage_file import NOT_DELIVERED, read_report, report_name, write_report
from gputop.core.slurm.usage_wrapper import job_cards, slurm_given

MIB = 1024 * 1024
PROFILE = {"used_memory_mib": 1200, "sm_util": 40}
PINNED_JOB = """\
import json, os, signal, sys, time
if "--pinned" not in sys.argv:
    uuids = json.loads(sys.argv[1])
    cards = ",".join(uuids[int(i)] for i in os.environ["SLURM_JOB_GPUS"].split(","))
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=cards)
    os.execve(sys.executable, [*sys.orig_argv, "--pinned"], env)
def term(signum, frame):
    print("SIGTERM reached the command", os.getpid(), flush=True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
signal.signal(signal.SIGTERM, term)
print("command pid", os.getpid(), flush=True)
time.sleep(float(sys.argv[2]))
sys.exit(int(sys.argv[3]))
"""
"""``python -c PINNED_JOB UUIDS SECONDS EXIT``: on its Slurm cards, by UUID, for SECONDS."""


@pytest.fixture(name="simulated")
def simulated_fixture(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host_pid_namespace: None
) -> list[str]:
    """The cluster, simulated v100x4 cards on a running clock for the jobs (sbatch passes
    the environment on), sampled every 0.1 s; the cards' UUIDs by node index."""
    scenario = scenario_file(tmp_path, PROFILE)
    monkeypatch.setenv("GPUTOP_FAKE", str(scenario))
    monkeypatch.delenv("GPUTOP_FAKE_TIME", raising=False)
    monkeypatch.setenv("GPUTOP_USAGE_POLL_S", "0.1")
    return [gpu["uuid"] for gpu in json.loads(scenario.read_text())["gpus"]]


def submit(capsys: pytest.CaptureFixture[str], uuids: list[str], seconds: float, code: int) -> int:
    argv = [sys.executable, "-c", PINNED_JOB, json.dumps(uuids), str(seconds), str(code)]
    status, out, err = gputop(capsys, "run", "--slurm", "--gpus", "1", "--", *argv)
    assert status == 0, err
    match = re.search(r"^Job (\d+) ", out, re.MULTILINE)
    assert match, out
    return int(match.group(1))


def job(capsys: pytest.CaptureFixture[str], job_id: int) -> dict[str, Any]:
    return next(j for j in jobs_json(capsys) if j["id"] == job_id)


def ended(
    capsys: pytest.CaptureFixture[str], job_id: int, note: str | None = None
) -> dict[str, Any]:
    """The job once it ended with its usage, or with a ``usage_note`` that starts with
    ``note``: the node's last report may come just after Slurm reports the end."""

    def check() -> dict[str, Any] | None:
        record = job(capsys, job_id)
        if record["status"] in ("waiting", "running"):
            return None
        if note is None:
            return record if record["usage"] is not None else None
        return record if (record["usage_note"] or "").startswith(note) else None

    return wait_for(check, f"job {job_id} to end and its usage report", poll_s=POLL_S)


def slurm_times(slurm: SlurmCluster, slurm_job_id: int) -> tuple[float, float]:
    """(start, end) of a job as ``squeue --json`` gives them (22.05: numbers; 23.02+:
    ``{"number": N}``)."""
    listed = json.loads(slurm.command("squeue", "--json", "--states=all").stdout)["jobs"]
    record = next(job for job in listed if job["job_id"] == slurm_job_id)
    start, end = (
        float(value["number"] if isinstance(value, dict) else value)
        for value in (record["start_time"], record["end_time"])
    )
    return start, end


def test_a_slurm_job_records_what_it_used_on_its_card_and_its_own_exit_status(
    slurm: SlurmCluster,
    simulated: list[str],
    capsys: pytest.CaptureFixture[str],
    private_state_dir: Path,
) -> None:
    job_id = submit(capsys, simulated, 2.5, 3)

    record = ended(capsys, job_id)

    assert (record["status"], record["exit_code"], record["signal"]) == ("failed", 3, None)
    assert (record["started_at"], record["ended_at"]) == slurm_times(
        slurm, record["slurm_job_id"]
    ), "the job's wall time is Slurm's"
    usage = record["usage"]
    (card,) = usage["per_card"]
    assert card["gpu"] == record["gpus"][0]
    assert card["uuid"] == simulated[card["gpu"]]
    assert card["peak_memory_bytes"] == 1200 * MIB
    assert card["mean_sm_percent"] == 40.0
    assert 1.0 <= card["gpu_seconds"] <= 4.0
    assert card["energy_j"] is not None and card["energy_j"] > 0
    assert usage["gpu_seconds"] == card["gpu_seconds"]
    assert usage["peak_memory_bytes"] == 1200 * MIB
    assert usage["samples"] >= 5
    assert record["usage_note"] is None
    slurm_id = record["slurm_job_id"]
    assert not (private_state_dir / "logs" / report_name(slurm_id)).exists()
    code, out, _ = gputop(capsys, "jobs")
    assert code == 0
    assert re.search(rf"^\s*{job_id}\s.*\d+s\s+1\.2G", out, re.MULTILINE), out


def test_the_processes_of_a_jobs_srun_step_count_as_the_jobs(
    simulated: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``srun`` asks slurmd for a step: its processes are not below the command."""
    # 4 s: a step starts through slurmd, and on a loaded machine the wrapper's first sample
    # of it came after a 2.5-s step had ended (peak None).
    argv = [sys.executable, "-c", PINNED_JOB, json.dumps(simulated), "4", "0"]
    status, out, err = gputop(
        capsys, "run", "--slurm", "--gpus", "1", "--", "srun", "--ntasks=1", *argv
    )
    assert status == 0, err

    record = ended(capsys, int(out.split()[1]))

    assert record["status"] == "exited", Path(record["log_path"]).read_text()
    assert record["usage"]["peak_memory_bytes"] == 1200 * MIB
    assert record["usage"]["gpu_seconds"] >= 1.0


def test_a_cancelled_slurm_job_gets_slurms_sigterm_in_its_command_and_keeps_its_usage(
    simulated: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = submit(capsys, simulated, 600, 0)

    def measured() -> dict[str, Any] | None:
        record = job(capsys, job_id)
        usage = record["usage"]
        return record if usage and usage["gpu_seconds"] >= 0.5 else None

    measuring = wait_for(measured, "its usage so far", poll_s=POLL_S)
    assert measuring["status"] == "running"
    pid = re.search(r"command pid (\d+)", Path(measuring["log_path"]).read_text())
    assert pid, "the command printed its pid"

    code, _, err = gputop(capsys, "jobs", "stop", "--yes", str(job_id))

    assert code == 0, err
    record = ended(capsys, job_id)
    assert (record["status"], record["status_text"]) == ("killed", "Cancelled")
    assert (record["signal"], record["exit_code"]) == (signal.SIGTERM, None)
    assert record["usage"] is not None
    assert record["usage"]["per_card"][0]["gpu_seconds"] >= 0.5
    assert f"SIGTERM reached the command {pid.group(1)}" in Path(record["log_path"]).read_text()


@pytest.mark.parametrize("node_lacks", ["the-interpreter", "nvml"])
def test_where_the_node_cannot_measure_the_command_runs_as_before_with_no_usage_and_why(
    simulated: list[str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    node_lacks: str,
) -> None:
    if node_lacks == "the-interpreter":
        monkeypatch.setattr(sys, "executable", str(tmp_path / "no" / "python3"))
        why = NOT_DELIVERED
    else:
        monkeypatch.setenv("GPUTOP_FAKE", str(tmp_path / "no-such-scenario.json"))
        why = "not measured on gputopnode: NVML cannot be read there: "
    words = ["a b", "$HOME", "it's"]
    status, out, err = gputop(
        capsys,
        "run",
        "--slurm",
        "--gpus",
        "1",
        "--",
        "/bin/sh",
        "-c",
        'printf "%s|" "$@"; echo "|pid $$"; exit 4',
        "sh",
        *words,
    )
    assert status == 0, err
    job_id = int(out.split()[1])

    record = ended(capsys, job_id, why)

    assert (record["status"], record["exit_code"]) == ("failed", 4)
    assert Path(record["log_path"]).read_text().startswith("a b|$HOME|it's||pid ")
    assert record["usage"] is None


def environment_in(log_path: str) -> dict[bytes, bytes]:
    """What ``env -0`` printed, but the variables Slurm sets for each job on its own."""
    printed = Path(log_path).read_bytes().split(b"\0")
    pairs = dict(item.split(b"=", 1) for item in printed if b"=" in item)
    return {k: b"" if k.startswith(b"SLURM_") else v for k, v in pairs.items()}


def test_the_wrapper_leaves_the_commands_environment_exactly_as_it_was(
    slurm: SlurmCluster,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("LANG", "LC_ALL", "LC_CTYPE"):  # the C locale, which Python's start coerces
        monkeypatch.delenv(name, raising=False)
    ids = []
    for python in (sys.executable, str(tmp_path / "no" / "python3")):
        monkeypatch.setattr(sys, "executable", python)
        status, out, err = gputop(capsys, "run", "--slurm", "--", "env", "-0")
        assert status == 0, err
        ids.append(int(out.split()[1]))
    wrapped_id, plain_id = ids

    wrapped = ended(capsys, wrapped_id, "not measured on gputopnode: Slurm gave the job no GPUs")
    plain = ended(capsys, plain_id, NOT_DELIVERED)

    assert wrapped["status"] == plain["status"] == "exited"
    assert b"LC_CTYPE" not in environment_in(wrapped["log_path"])
    assert environment_in(wrapped["log_path"]) == environment_in(plain["log_path"])


def test_the_batch_script_runs_the_wrapper_only_where_its_interpreter_starts(
    tmp_path: Path,
) -> None:
    meter = node_meter(tmp_path)
    assert meter is not None and meter.python == sys.executable
    script = batch_script(["python3", "-c", "print('$HOME')"], meter)
    lines = script.splitlines()
    assert lines[-1] == "exec python3 -c 'print('\"'\"'$HOME'\"'\"')'"
    assert any(line.startswith(f"if {sys.executable} -E -c ''") for line in lines)


def test_a_report_is_read_only_as_the_users_own_regular_file_with_sane_numbers(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o700)
    card = CardUsage(2, "GPU-x", 5 * MIB, 30.0, 12.5, 40.0)
    usage = JobUsage(per_card=(card,), peak_memory_bytes=5 * MIB, samples=9)
    write_report(logs, 77, "node07", usage=usage)
    assert read_report(logs, 77) == usage.to_text()
    assert read_report(logs, 78) is None

    report = logs / report_name(77)
    body = json.loads(report.read_text())
    body["usage"]["per_card"][0]["gpu_seconds"] = -1
    report.write_text(json.dumps(body))
    assert usage_note_from_text(read_report(logs, 77)) == (
        "not measured: the node's usage report is not a valid report"
    )

    elsewhere = tmp_path / "elsewhere.json"
    write_report(logs, 77, "node07", not_measured="not measured on node07: \x1b]0;owned\x07")
    report.rename(elsewhere)
    report.symlink_to(elsewhere)
    note = usage_note_from_text(read_report(logs, 77))
    assert note is not None and note.startswith("not measured: the usage report was refused")

    report.unlink()
    elsewhere.rename(report)
    assert usage_note_from_text(read_report(logs, 77)) == (
        "not measured on node07: \\e]0;owned\\x07"
    )


@pytest.mark.parametrize(
    ("variables", "nvml_sees", "cards"),
    [
        ({"SLURM_JOB_GPUS": "2,3"}, [0, 1, 2, 3], [(2, 2), (3, 3)]),
        ({"SLURM_JOB_GPUS": "3,1"}, [0, 1], [(0, 1), (1, 3)]),
        ({"SLURM_JOB_GPUS": "0,1"}, [0, 1], [(0, 0), (1, 1)]),
        ({"SLURM_STEP_GPUS": "1"}, [0, 1, 2, 3], [(1, 1)]),
        ({"SLURM_JOB_GPUS": "7"}, [0, 1, 2, 3], []),
        ({"SLURM_JOB_GPUS": "0;rm"}, [0], []),
    ],
    ids=["every-card-seen", "renumbered", "first-cards", "a-step", "not-seen", "not-indices"],
)
def test_the_meter_takes_the_cards_slurm_gave_in_nvmls_numbering_where_it_runs(
    variables: dict[str, str], nvml_sees: list[int], cards: list[tuple[int, int]]
) -> None:
    assert job_cards(slurm_given(variables), nvml_sees) == cards


@pytest.mark.parametrize("wrapper", ["runs", "cannot-import-gputop"])
def test_the_wrapped_command_has_the_same_streams_and_dies_by_the_same_signal(
    tmp_path: Path, wrapper: str
) -> None:
    """The batch script run as slurmd runs it (``sh SCRIPT``), wrapped and not: the command
    reads the same stdin, writes the same stdout and stderr, and its death by a signal is
    the script's own, whether the wrapper measures or cannot even import gputop."""
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o700)
    meter = node_meter(logs)
    assert meter is not None
    if wrapper == "cannot-import-gputop":
        meter = replace(meter, package_dir=str(tmp_path / "no-gputop"))
    command = ["/bin/sh", "-c", 'cat; echo "to stderr $0" >&2; kill -USR1 $$', "it's"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SLURM_JOB_ID"] = "99"  # and no GPUs: the meter says so and ends
    results = []
    for script in (batch_script(command, meter), batch_script(command)):
        path = tmp_path / "script.sh"
        path.write_text(script)
        done = subprocess.run(
            ["/bin/sh", str(path)], input=b"from stdin\n", capture_output=True, env=env, timeout=30
        )
        results.append((done.returncode, done.stdout, done.stderr))

    wrapped, plain = results
    assert plain == (-signal.SIGUSR1, b"from stdin\n", b"to stderr it's\n")
    assert wrapped == plain
    if wrapper == "runs":  # the meter ran beside the command: it said why it measured nothing
        note = wait_for(lambda: read_report(logs, 99), "the meter's report", poll_s=POLL_S)
        assert "no GPUs" in (usage_note_from_text(note) or "")
    else:
        assert read_report(logs, 99) is None
