"""`gputop jobs wait`: block until jobs end, exit with their status, and say so.

Real jobs (real processes started by the real supervisor) on simulated cards; the terminal
notification is read back from a pseudo-terminal.
"""

from __future__ import annotations

import json
import os
import pty
import select
import time
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.jobs import PYTHON, launch, wait_until_ended

from gputop.cli.main import main
from gputop.core.jobs.model import JobState
from gputop.core.jobs.notify import (
    ENDED,
    STARTED,
    JobEvent,
    event_environment,
    job_events,
    terminal_notification,
)
from gputop.core.jobs.service import JobsView, job_memory_peaks
from gputop.core.model import GpuProcess, GpuSample, ProcessType, Snapshot

RECORD = (
    "import json, os, sys; json.dump({k: v for k, v in os.environ.items() "
    "if k.startswith('GPUTOP_')}, open(sys.argv[1] + '.tmp', 'w')); "
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1])"
)
"""A notify command's script: its GPUTOP_ variables to a JSON file, written atomically."""


def python_job(code: str) -> list[str]:
    return [PYTHON, "-c", code]


def test_wait_returns_the_jobs_exit_code_and_says_how_it_ended(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = launch(state_dir, python_job("import time, sys; time.sleep(0.5); sys.exit(3)"))
    assert main(["jobs", "wait", str(job.id)]) == 3
    assert f"Job {job.id} (python -c) failed 3 after" in capsys.readouterr().out


def test_with_several_jobs_the_first_that_failed_gives_the_status(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = launch(state_dir, python_job("pass"))
    killed = launch(state_dir, python_job("import os, signal; os.kill(os.getpid(), 15)"))
    assert main(["jobs", "wait", str(good.id), str(killed.id)]) == 128 + 15


def test_timeout_gives_up_with_124_and_leaves_the_job_running(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = launch(state_dir, python_job("import time; time.sleep(60)"))
    assert main(["jobs", "wait", "--timeout", "0.5", str(job.id)]) == 124
    assert "still active" in capsys.readouterr().err


def test_an_unknown_job_is_refused(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    launch(state_dir, python_job("pass"))
    assert main(["jobs", "wait", "99"]) != 0
    assert "There is no job 99" in capsys.readouterr().err


def test_the_notify_command_gets_the_jobs_facts_in_its_environment_never_its_command_line(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "notified.json"
    marker = tmp_path / "injected"
    name = f"x; touch {marker} $(touch {marker})"
    job = launch(state_dir, python_job("import time; time.sleep(0.3)"), name=name)
    record = RECORD
    command = f"{PYTHON} -c {json.dumps(record)} {out}"
    assert main(["jobs", "wait", "--notify-command", command, str(job.id)]) == 0
    facts = json.loads(out.read_text())
    assert facts["GPUTOP_EVENT"] == "ended" and facts["GPUTOP_JOB_ID"] == str(job.id)
    assert facts["GPUTOP_JOB_NAME"] == name and facts["GPUTOP_JOB_STATUS"] == "exited"
    assert facts["GPUTOP_JOB_EXIT_CODE"] == "0" and facts["GPUTOP_JOB_GPUS"] == "0"
    assert not marker.exists()


def read_until(fd: int, wanted: bytes, timeout_s: float = 30.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout_s
    while wanted not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"timed out waiting for {wanted!r}; read {seen!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    return seen


@pytest.mark.parametrize(
    ("terminal", "expected_start", "expected_end"),
    [
        ({"TERM_PROGRAM": "WezTerm"}, b"\x1b]9;gputop: Job 1 (", b"\x07"),
        ({"VTE_VERSION": "7600"}, b"\x1b]777;notify;gputop;Job 1 (", b"\x07"),
        ({"TERM_PROGRAM": "WezTerm", "TMUX": "/tmp/t,1,0"}, b"\x1bPtmux;\x1b\x1b]9;", b"\x1b\\"),
    ],
)
def test_the_terminal_is_notified_with_the_name_cleaned(
    state_dir: Path, terminal: dict[str, str], expected_start: bytes, expected_end: bytes
) -> None:
    job = launch(state_dir, python_job("import time; time.sleep(1)"), name="evil\x1b]0;pwned\x07")
    pid, fd = pty.fork()
    if pid == 0:  # the child: gputop jobs wait on this terminal
        env = {k: v for k, v in os.environ.items() if k not in ("VTE_VERSION", "TERM_PROGRAM")}
        env.update(terminal)
        os.execve(PYTHON, [PYTHON, "-m", "gputop", "jobs", "wait", str(job.id)], env)
    try:
        seen = read_until(fd, b"exited 0 after")
        seen += read_until(fd, expected_end, timeout_s=5)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    start = seen.index(expected_start)
    notification = seen[start : seen.index(expected_end, start + 1) + len(expected_end)]
    assert b"evil\\e]0,pwned\\x07" in notification  # the name's ESC and BEL made visible
    assert b"\x1b]0;" not in seen


def test_a_terminal_without_known_notifications_gets_the_bell() -> None:
    assert terminal_notification("gputop", "Job 1 ended", {"TERM": "xterm-256color"}) == b"\x07"


def test_job_events_are_ends_and_starts_after_waiting_never_old_news(state_dir: Path) -> None:
    running = launch(state_dir, python_job("import time; time.sleep(0.2)"))
    ended = wait_until_ended(state_dir, running.id)
    assert [e.kind for e in job_events([running], [ended])] == [ENDED]
    assert job_events([], [ended]) == [] and job_events([ended], [ended]) == []
    # ... unless the reader launched it: a job that ends before the next read is its news
    assert [e.kind for e in job_events([], [ended], launched={ended.id})] == [ENDED]
    assert job_events([ended], [ended], launched={ended.id}) == []
    waiting = replace(running, state=JobState.WAITING)
    started = replace(running, state=JobState.RUNNING)
    (event,) = job_events([waiting], [started])
    assert event == JobEvent(STARTED, started) and "started on GPU 0" in event.text


def test_gputop_run_notify_command_is_run_by_the_supervisor_when_the_job_ends(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "notified.json"
    record = RECORD
    notify = f"{PYTHON} -c {json.dumps(record)} {out}"
    argv = ["run", "--fake", "v100x4", "--gpus", "2", "--notify-command", notify, "--"]
    assert main([*argv, PYTHON, "-c", "raise SystemExit(2)"]) == 0
    wait_until_ended(state_dir, 1)
    deadline = time.monotonic() + 30
    while not out.exists():
        assert time.monotonic() < deadline, "the notify command never ran"
        time.sleep(0.05)
    facts = json.loads(out.read_text())
    assert facts["GPUTOP_EVENT"] == "ended" and facts["GPUTOP_JOB_EXIT_CODE"] == "2"
    assert facts["GPUTOP_JOB_STATUS_TEXT"] == "failed 2" and facts["GPUTOP_JOB_GPUS"] == "2"


def test_a_notify_command_with_a_bad_quote_is_refused_before_anything_is_launched(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--fake", "v100x4", "--gpus", "2", "--notify-command", "say 'oops", "--"]
    assert main([*argv, PYTHON, "-c", "pass"]) == 2
    assert "Cannot read the notify command" in capsys.readouterr().err
    assert not (state_dir / "jobs.sqlite3").exists()


def test_the_peak_memory_a_dashboard_saw_is_in_the_word_when_a_job_ends(state_dir: Path) -> None:
    running = launch(state_dir, python_job("import time; time.sleep(0.2)"))
    ended = wait_until_ended(state_dir, running.id)
    gib = 1 << 30
    gpu = GpuSample(0, "GPU-x", "card", None)
    holding = [
        GpuProcess(4242, 0, ProcessType.COMPUTE, gib),
        GpuProcess(4243, 0, ProcessType.COMPUTE, gib),
    ]
    view = JobsView(jobs=(running,), job_of_pid={4242: running.id, 4243: running.id})
    both = Snapshot("h", None, None, None, 0.0, (replace(gpu, processes=tuple(holding)),))
    one = Snapshot("h", None, None, None, 1.0, (replace(gpu, processes=tuple(holding[:1])),))
    peaks = job_memory_peaks({}, both, view)
    peaks = job_memory_peaks(peaks, one, view)
    assert peaks == {running.id: 2 * gib}
    (event,) = job_events([running], [ended], peaks)
    assert event.text.endswith(", peak 2.0G GPU memory.")
    assert event_environment(event)["GPUTOP_JOB_PEAK_MEMORY_BYTES"] == str(2 * gib)
    assert job_memory_peaks(peaks, one, JobsView()) == {}


def test_a_notify_command_for_a_job_launched_elsewhere_is_refused(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--slurm", "--gpus", "1", "--notify-command", "true", "--", "python", "t.py"]
    assert main(argv) == 2
    assert "--notify-command works for jobs launched on this machine" in capsys.readouterr().err


def test_a_job_that_waited_for_its_card_sends_word_when_it_starts_and_when_it_ends(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "events.txt"
    append = "import os, sys; open(sys.argv[1], 'a').write(os.environ['GPUTOP_EVENT'] + '\\n')"
    notify = f"{PYTHON} -c {json.dumps(append)} {out}"
    argv = ["run", "--fake", "v100x4", "--gpus", "2", "--wait", "--notify-command", notify]
    assert main([*argv, "--", PYTHON, "-c", "import time; time.sleep(1)"]) == 0
    wait_until_ended(state_dir, 1)
    deadline = time.monotonic() + 30
    while not (out.exists() and out.read_text().count("\n") == 2):
        assert time.monotonic() < deadline, "no word of the start and the end"
        time.sleep(0.05)
    assert out.read_text() == "started\nended\n"


async def test_a_read_of_the_jobs_arriving_late_never_hides_a_newer_one(state_dir: Path) -> None:
    """The sampling thread and a worker read the jobs at once; the older read, posted last,
    must not replace the newer one: the job would vanish, then end unannounced."""
    from helpers.dashboard import first_sample, make_app

    from gputop.tui.jobs_actions import JobsRead

    running = launch(state_dir, python_job("import time; time.sleep(0.2)"))
    ended = wait_until_ended(state_dir, running.id)
    app = make_app("v100x4")
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        newest = 10**9  # above any read of the app's own
        app.post_message(JobsRead(JobsView(jobs=(running,), read_number=newest)))
        app.post_message(JobsRead(JobsView(jobs=(), read_number=newest - 1)))
        deadline = time.monotonic() + 10
        while app.jobs_service.view.read_number < newest and time.monotonic() < deadline:
            await pilot.pause(0.05)
        await pilot.pause()
        assert app.jobs_service.view.jobs == (running,)
        app.post_message(JobsRead(JobsView(jobs=(ended,), read_number=newest + 1)))
        ends: list[str] = []
        deadline = time.monotonic() + 10
        while not ends and time.monotonic() < deadline:
            await pilot.pause(0.05)
            ends = [n.message for n in app._notifications if f"Job {ended.id} (" in n.message]
        assert ends and "exited 0" in ends[0], "no word of the job's end"


def test_a_job_that_could_not_start_says_why_in_its_end_word(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = launch(state_dir, ["no-such-program-gputop", "x"])
    assert main(["jobs", "wait", str(job.id)]) == 127
    # waited for, or already ended when the wait began: either way, the note is said
    assert "failed 127: no-such-program-gputop: command not found." in capsys.readouterr().out
    ended = wait_until_ended(state_dir, job.id)
    (event,) = job_events([job], [ended])
    assert event.text.endswith("failed 127: no-such-program-gputop: command not found.")


def test_the_note_in_the_end_word_is_cleaned_and_cut(state_dir: Path) -> None:
    running = launch(state_dir, python_job("import time; time.sleep(0.2)"))
    ended = wait_until_ended(state_dir, running.id)
    note = "evil\x1b]0;pwned\x07 " + "x" * 500
    (event,) = job_events([running], [replace(ended, exit_code=3, note=note)])
    assert "\x1b" not in event.text and "evil\\e]0;pwned\\x07 xxx" in event.text
    assert event.text.endswith("….") and len(event.text) < 300


async def test_the_dashboards_toast_says_why_a_job_could_not_start(state_dir: Path) -> None:
    from helpers.dashboard import first_sample, make_app

    from gputop.tui.jobs_actions import JobsRead

    job = launch(state_dir, ["no-such-program-gputop"])
    ended = wait_until_ended(state_dir, job.id)
    app = make_app("v100x4")
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        newest = 10**9  # above any read of the app's own
        app.post_message(JobsRead(JobsView(jobs=(job,), read_number=newest)))
        deadline = time.monotonic() + 10
        while app.jobs_service.view.read_number < newest and time.monotonic() < deadline:
            await pilot.pause(0.05)
        app.post_message(JobsRead(JobsView(jobs=(ended,), read_number=newest + 1)))
        ends: list[str] = []
        deadline = time.monotonic() + 10
        while not ends and time.monotonic() < deadline:
            await pilot.pause(0.05)
            ends = [n.message for n in app._notifications if f"Job {job.id} (" in n.message]
        assert ends == [
            f"Job {job.id} (no-such-program-gputop) failed 127: "
            "no-such-program-gputop: command not found."
        ]
