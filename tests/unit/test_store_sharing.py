"""One job store per state directory and process, shared by every thread (docs/sqlite.md).

Threads open, use and close the shared store at once, as the dashboard's sampler, its
launch and stop workers and the lab agent do; what one opening learnt (a store moved aside)
reaches the person even when another thread's opening won the race; a reader that gives
its store up closes it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest
from helpers.jobs import asked_job

from gputop.core.jobs import store_connection as store_module
from gputop.core.jobs.store import JobStore

THREADS = 12
ROUNDS = 30


def _create(store: JobStore, name: str) -> int:
    return store.create_job(asked_job(name=name, command=["true"])).id


def _descriptors_of(path: Path) -> int:
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == str(path):
                count += 1
        except OSError:
            pass
    return count


def test_threads_opening_using_and_closing_the_shared_store(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    holder = JobStore.open(state_dir)
    errors: list[BaseException] = []
    created: list[int] = []
    most_descriptors = [0]
    start = threading.Barrier(THREADS)

    def hammer(n: int) -> None:
        try:
            start.wait()
            for round_ in range(ROUNDS):
                store = JobStore.open(state_dir, repair=n % 2 == 0)
                try:
                    store.list_jobs()
                    store.take_notices()
                    if round_ % 5 == n % 5:
                        created.append(_create(store, f"t{n}-{round_}"))
                        store.add_history(f"echo {n} {round_}")
                    most_descriptors[0] = max(
                        most_descriptors[0], _descriptors_of(state_dir / "jobs.sqlite3")
                    )
                finally:
                    store.close()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert sorted(job.id for job in holder.list_jobs()) == sorted(created)
    assert len(created) == THREADS * ROUNDS // 5
    # one connection (its descriptor of the store) the whole time, the holder's
    assert most_descriptors[0] == 1
    assert store_module._OPEN[holder.state_dir] is holder and holder._users == 1
    holder.close()
    assert holder.state_dir not in store_module._OPEN
    with pytest.raises(sqlite3.ProgrammingError):
        holder._conn.execute("SELECT 1")
    assert _descriptors_of(state_dir / "jobs.sqlite3") == 0


def test_what_a_losing_opening_learnt_is_still_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads open the store at once; the one that repaired it lost the race to
    register its store: its notice (a store moved aside) must still be said."""
    state_dir = tmp_path / "state"
    JobStore.open(state_dir).close()
    both_opened = threading.Barrier(2)
    real = store_module.open_connection

    def opening(directory: Path, notices: list[str], *, repair: bool = False):  # type: ignore[no-untyped-def]
        connection = real(directory, notices, repair=repair)
        if repair:
            notices.append("The job store was damaged; it was moved aside.")
        both_opened.wait(10)
        if repair:  # the other thread registers first
            while store_module._OPEN.get(directory) is None:
                threading.Event().wait(0.01)
        return connection

    monkeypatch.setattr(store_module, "open_connection", opening)
    opened: dict[str, JobStore] = {}

    def open_as(name: str, repair: bool) -> None:
        opened[name] = JobStore.open(state_dir, repair=repair)

    threads = [
        threading.Thread(target=open_as, args=("reader", False)),
        threading.Thread(target=open_as, args=("launcher", True)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert opened["reader"] is opened["launcher"]
    try:
        assert "moved aside" in " ".join(opened["launcher"].take_notices())
    finally:
        opened["reader"].close()
        opened["launcher"].close()


def test_the_lab_agent_closes_a_store_it_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that fails drops the agent's store: it must close it, else the shared store
    keeps a user forever and the agent's next open gets the same failing store back."""
    from gputop.core.errors import GputopError
    from gputop.core.remote.agent import read_jobs_from_store

    state_dir = tmp_path / "state"
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(state_dir))
    JobStore.open(state_dir).close()
    read = read_jobs_from_store()
    assert read() == ([], None)
    store = store_module._OPEN[state_dir.absolute()]
    failures = iter([True])

    def list_jobs_once_failing() -> list:  # type: ignore[type-arg]
        if next(failures, False):
            raise GputopError("Cannot read the job store: a passing error.")
        return []

    monkeypatch.setattr(store, "list_jobs", list_jobs_once_failing)
    jobs, problem = read()
    assert jobs is None and problem is not None
    assert store._users == 0 and store.state_dir.absolute() not in store_module._OPEN
    assert read() == ([], None)
    again = store_module._OPEN[state_dir.absolute()]
    assert again is not store
    again.close()


def test_a_launch_beside_a_reader_repairs_a_store_proven_damaged(tmp_path: Path) -> None:
    """The dashboard's sampler holds the shared store when it turns out damaged: a launch
    (a command that records jobs) proves the damage and moves it aside as a launch from a
    CLI does, keeping the jobs; before, every launch from the dashboard failed with
    'database disk image is malformed' until a gputop run elsewhere repaired the store."""
    from test_store_damage import _damage_a_middle_page, _fill

    from gputop.core.jobs.store import StoreError

    state_dir = tmp_path / "state"
    _fill(state_dir)
    sampler = JobStore.open(state_dir)
    sampler.list_jobs()
    _damage_a_middle_page(state_dir / "jobs.sqlite3")
    other = sqlite3.connect(state_dir / "jobs.sqlite3")  # another process's write: the
    other.execute("INSERT INTO history VALUES ('echo other', 9999, 0)")  # cache is stale
    other.commit()
    other.close()
    try:
        with pytest.raises(StoreError, match="malformed"):
            sampler.list_jobs()
        launcher = JobStore.open(state_dir, repair=True)
        assert launcher is sampler
        try:
            new = _create(launcher, "after the damage")
            (notice,) = [text for text in launcher.take_notices() if "moved aside" in text]
            assert "jobs read back from it" in notice
        finally:
            launcher.close()
        jobs = sampler.list_jobs()
        assert new == 301 and len(jobs) >= 290 and jobs[-1].name == "after the damage"
    finally:
        sampler.close()
    assert list(state_dir.glob("jobs.sqlite3.corrupt-*"))


def test_a_forked_child_opens_its_own_store(tmp_path: Path) -> None:
    """A child forked while another thread was opening the store (holding the registry's
    lock) opens a store of its own: the parent's connection is never used across the
    fork, and the child does not wait for ever on a lock whose holder it did not inherit."""
    import multiprocessing

    state_dir = tmp_path / "state"
    parent = JobStore.open(state_dir)
    _create(parent, "before the fork")
    holding = threading.Event()
    release = threading.Event()

    def hold_the_registry() -> None:
        with store_module._OPEN_LOCK:
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold_the_registry)
    holder.start()
    holding.wait(10)
    try:
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        child = context.Process(target=_child_reads, args=(state_dir, id(parent), results))
        child.start()
        child.join(30)
        alive = child.is_alive()
        if alive:
            child.kill()
            child.join()
    finally:
        release.set()
        holder.join()
    assert not alive, "the child waited for ever on the parent's registry lock"
    assert results.get(timeout=5) == (False, 1)
    assert len(parent.list_jobs()) == 2  # the child's job, seen by the parent
    parent.close()


def _child_reads(state_dir: Path, parent_store: int, results: object) -> None:
    store = JobStore.open(state_dir)
    try:
        _create(store, "in the child")
        results.put((id(store) == parent_store, store._users))  # type: ignore[attr-defined]
    finally:
        store.close()
