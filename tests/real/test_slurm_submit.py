"""``gputop run --slurm`` against a real one-node Slurm cluster (tests/helpers/slurm_cluster.py).

Slurm chooses the cards; gputop records Slurm's job id, shows Slurm's state and reason,
the card each job got, its output, and cancels with ``scancel``; what Slurm refuses is
shown in Slurm's own words with nothing recorded (docs/slurm.md).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.slurm_cli import DEADLINE_S, POLL_S, gputop, jobs_json
from helpers.slurm_cluster import GPU_COUNT, SlurmCluster, free_port
from helpers.waiting import wait_for

from gputop.core.jobs.store import JobStore

# What Slurm says of a job waiting for cards the others hold (its reason is set at a
# scheduling pass: "Priority" while it ranks behind jobs that were pending when it arrived).
WAITING_FOR_CARDS = ("Pending: Resources", "Pending: Priority")
REPORT = "echo CVD=$CUDA_VISIBLE_DEVICES JOB_GPUS=$SLURM_JOB_GPUS; exec sleep 600"


def submit_reporting_job(capsys: pytest.CaptureFixture[str], name: str) -> int:
    code, out, err = gputop(
        capsys, "run", "--slurm", "--gpus", "1", "--name", name, "--", "sh", "-c", REPORT
    )
    assert code == 0, err
    match = re.search(r"^Job (\d+) .* submitted to Slurm as job (\d+)\.$", out, re.MULTILINE)
    assert match, out
    return int(match.group(1))


def card_in_output(log_path: str) -> tuple[str, str] | None:
    """(CUDA_VISIBLE_DEVICES, SLURM_JOB_GPUS) as the job printed them, once it has."""
    path = Path(log_path)
    if not path.exists():
        return None
    found = re.search(r"CVD=(\S*) JOB_GPUS=(\S*)", path.read_text())
    return (found.group(1), found.group(2)) if found else None


def test_four_of_five_one_gpu_jobs_run_each_on_the_card_it_reports_the_fifth_pends(
    slurm: SlurmCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [submit_reporting_job(capsys, f"job{n}") for n in range(GPU_COUNT + 1)]

    def settled() -> list[dict[str, Any]] | None:
        jobs = jobs_json(capsys)
        running = [job for job in jobs if job["status"] == "running" and job["gpus"]]
        return jobs if len(running) == GPU_COUNT else None

    jobs = wait_for(settled, "four jobs running on cards", poll_s=POLL_S)
    running = [job for job in jobs if job["status"] == "running"]
    pending = [job for job in jobs if job["status"] == "waiting"]
    assert sorted(job["id"] for job in jobs) == ids
    assert len(pending) == 1
    assert pending[0]["status_text"] in WAITING_FOR_CARDS
    assert sorted(card for job in running for card in job["gpus"]) == list(range(GPU_COUNT))
    for job in running:
        log_path = job["log_path"]
        reported = wait_for(
            lambda: card_in_output(log_path),  # noqa: B023
            f"job {job['id']}'s output",
            poll_s=POLL_S,
        )
        assert reported == (str(job["gpus"][0]), str(job["gpus"][0]))


def test_cancelling_a_running_job_frees_its_card_for_the_pending_one(
    slurm: SlurmCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [submit_reporting_job(capsys, f"job{n}") for n in range(GPU_COUNT + 1)]
    waiting_id = ids[-1]

    def settled() -> list[dict[str, Any]] | None:
        jobs = {job["id"]: job for job in jobs_json(capsys)}
        if jobs[waiting_id]["status_text"] not in WAITING_FOR_CARDS:
            return None
        others = [jobs[job_id] for job_id in ids[:-1]]
        return others if all(job["status"] == "running" and job["gpus"] for job in others) else None

    victim = wait_for(settled, "four jobs on cards and the fifth pending", poll_s=POLL_S)[1]
    freed_card = victim["gpus"][0]

    code, out, err = gputop(capsys, "jobs", "stop", "--yes", str(ids[1]))

    assert code == 0, err
    assert f"scancel {victim['slurm_job_id']}" in out
    started = wait_for(
        lambda: next(
            (
                job
                for job in jobs_json(capsys)
                if job["id"] == waiting_id and job["status"] == "running"
            ),
            None,
        ),
        "the pending job running",
        poll_s=POLL_S,
    )
    assert started["gpus"] == [freed_card]
    reported = wait_for(lambda: card_in_output(started["log_path"]), "its output", poll_s=POLL_S)
    assert reported == (str(freed_card), str(freed_card))
    cancelled = next(job for job in jobs_json(capsys) if job["id"] == ids[1])
    assert (cancelled["status"], cancelled["status_text"]) == ("killed", "Cancelled")


def test_jobs_log_prints_what_slurm_wrote_to_the_output_file(
    slurm: SlurmCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = submit_reporting_job(capsys, "logged")
    log_path = next(job["log_path"] for job in jobs_json(capsys) if job["id"] == job_id)
    wait_for(lambda: card_in_output(log_path), "the job's output", poll_s=POLL_S)

    code, out, _ = gputop(capsys, "jobs", "log", str(job_id))

    assert code == 0
    assert re.search(r"CVD=\d JOB_GPUS=\d", out)


def test_every_word_of_the_command_reaches_the_job_unchanged(
    slurm: SlurmCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    words = ["a b", "$HOME", "it's", "`id`", "; echo no", "*"]
    code, out, err = gputop(
        capsys,
        "run",
        "--slurm",
        "--cwd",
        str(tmp_path),
        "--",
        "python3",
        "-c",
        "import json, sys; print(json.dumps(sys.argv[1:]))",
        *words,
    )
    assert code == 0, err
    job_id = int(out.split()[1])
    ended = wait_for(
        lambda: next(
            (j for j in jobs_json(capsys) if j["id"] == job_id and j["status"] == "exited"), None
        ),
        "the job to exit",
        poll_s=POLL_S,
    )
    assert json.loads(Path(ended["log_path"]).read_text().strip()) == words


@pytest.mark.parametrize(
    ("options", "slurm_says"),
    [
        (("--partition", "nosuch", "--gpus", "1"), "invalid partition specified: nosuch"),
        (("--gres", "gpu:h100:1"), "Requested node configuration is not available"),
        (("--gpus", str(GPU_COUNT + 1)), "Requested node configuration is not available"),
    ],
    ids=["no-such-partition", "no-such-gpu-type", "more-gpus-than-the-node-has"],
)
def test_a_submission_slurm_refuses_shows_slurms_message_and_records_nothing(
    slurm: SlurmCluster,
    capsys: pytest.CaptureFixture[str],
    private_state_dir: Path,
    options: tuple[str, ...],
    slurm_says: str,
) -> None:
    code, _, err = gputop(capsys, "run", "--slurm", *options, "--", "true")

    assert code != 0
    assert slurm_says in err
    assert "Traceback" not in err
    with JobStore.open(private_state_dir) as store:
        assert store.list_jobs() == []


def point_at_a_dead_controller(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same cluster's configuration with the controller on a port nobody listens on.

    Slurm's commands retry a controller that refuses for ``MessageTimeout`` (10 s by
    default) before they give up: 2 s here, the same refusal sooner."""
    conf = re.sub(
        r"^SlurmctldPort=\d+$",
        f"SlurmctldPort={free_port()}\nMessageTimeout=2",
        slurm.conf.read_text(),
        flags=re.MULTILINE,
    )
    (tmp_path / "slurm.conf").write_text(conf)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))


def test_a_controller_that_is_down_is_said_in_slurms_words_and_nothing_recorded(
    slurm: SlurmCluster,
    capsys: pytest.CaptureFixture[str],
    private_state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    point_at_a_dead_controller(slurm, tmp_path, monkeypatch)

    code, _, err = gputop(capsys, "run", "--slurm", "--gpus", "1", "--", "true")

    assert code != 0
    assert "Unable to contact slurm controller" in err
    with JobStore.open(private_state_dir) as store:
        assert store.list_jobs() == []


def test_listing_jobs_while_the_controller_is_down_keeps_the_last_state_and_says_why(
    slurm: SlurmCluster,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job_id = submit_reporting_job(capsys, "before")
    wait_for(
        lambda: any(j["id"] == job_id and j["status"] == "running" for j in jobs_json(capsys)),
        "it to run",
        poll_s=POLL_S,
    )
    point_at_a_dead_controller(slurm, tmp_path, monkeypatch)

    code, out, err = gputop(capsys, "jobs")

    assert code == 0
    assert "Slurm did not answer: squeue: Failed while looking for jobs" in err
    assert re.search(rf"^\s*{job_id}\s+before\s+\d\s+Running", out, re.MULTILINE)


def test_slurm_options_without_slurm_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = gputop(capsys, "run", "--partition", "debug", "--gpus", "0", "--", "true")

    assert code != 0
    assert "--partition is a Slurm option: add --slurm" in err


def test_a_slurm_job_submitted_from_another_host_of_the_cluster_is_cancelled_from_here(
    slurm: SlurmCluster, capsys: pytest.CaptureFixture[str], private_state_dir: Path
) -> None:
    job_id = submit_reporting_job(capsys, "elsewhere")
    with sqlite3.connect(private_state_dir / "jobs.sqlite3") as connection:
        connection.execute("UPDATE jobs SET host = 'login-node-2' WHERE id = ?", (job_id,))

    code, out, err = gputop(capsys, "jobs", "stop", "--yes", str(job_id))

    assert code == 0, err
    assert "cancelled in Slurm" in out
    wait_for(
        lambda: any(
            j["id"] == job_id and j["status_text"] == "Cancelled" for j in jobs_json(capsys)
        ),
        "Slurm to report it cancelled",
        poll_s=POLL_S,
    )


def test_following_a_slurm_jobs_log_waits_for_its_output_and_ends_with_the_job(
    slurm: SlurmCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = gputop(
        capsys, "run", "--slurm", "--", "sh", "-c", "sleep 1; echo hello-from-slurm"
    )
    assert code == 0, err
    job_id = out.split()[1]

    followed = subprocess.run(
        [sys.executable, "-m", "gputop", "jobs", "log", "--follow", job_id],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env=os.environ,
    )

    assert followed.returncode == 0, followed.stderr
    assert "hello-from-slurm" in followed.stdout
