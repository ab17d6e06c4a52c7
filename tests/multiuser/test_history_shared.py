"""A shared history store (``gputop record --readable-by all|GROUP``): a live recorder writes
it as root, and a real second user (uid 65534, tests/helpers/other_user.py) reads it with
``gputop report`` and the dashboard's history readers, never writing or creating anything,
never blocking the recorder; and what a reader refuses (docs/history.md, "A shared store")."""

from __future__ import annotations

import grp
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.history import holders_scenario, record_stepped
from helpers.other_user import (
    OTHER_GID,
    OTHER_UID,
    as_other_user,
    gputop_as_other_user,
    other_user_python,
    require_root,
)

from gputop.cli.main import main
from gputop.core.history.store import HistoryError, open_for_reading

WAIT_S = 60.0
RECORD = (sys.executable, "-m", "gputop", "record", "--interval", "1", "--fake")
WINDOW = ("--since", "2000-01-01", "--until", "2100-01-01")
"""Every sample: a recorder on a fast simulated clock dates them ahead of real time."""
READ_AS_DASHBOARD = """
import json, sys, time
from gputop.core.history.card_history import read_card_history
from gputop.core.history.store import default_history_path
found = read_card_history(default_history_path(), 1, 400 * 86400.0, time.time() + 200 * 86400, 40)
print(json.dumps({"problem": found.problem, "holders": [str(r.key) for r in found.holders],
                  "series": found.series is not None}))
"""


@pytest.fixture
def reachable(tmp_path: Path) -> Iterator[Path]:
    """A directory both users can reach (tmp_path's parents are root's only)."""
    require_root()
    directory = Path(tempfile.mkdtemp(prefix="gputop-shared-store-", dir="/tmp"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def samples_in(store: Path) -> int:
    try:
        connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        return int(connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        connection.close()


def files_of(directory: Path) -> dict[str, tuple[int, int]]:
    """Each file's (owner, mode)."""
    found = {}
    for name in os.listdir(directory):
        info = os.stat(directory / name, follow_symlinks=False)
        found[name] = (info.st_uid, stat.S_IMODE(info.st_mode))
    return found


def python_as_other_user(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    found = other_user_python()
    if found is None:
        pytest.skip(f"no Python that uid {OTHER_UID} may execute")
    python, path = found
    return as_other_user([python, "-c", code], {"PYTHONPATH": path, "HOME": "/nonexistent", **env})


def report_as_other_user(store: Path, *args: str) -> subprocess.CompletedProcess:
    return gputop_as_other_user(
        "report", "--db", str(store), "--json", *WINDOW, *args, env={"HOME": "/nonexistent"}
    )


def test_another_user_reads_a_live_shared_store_without_writing_or_blocking_it(
    reachable: Path, tmp_path: Path
) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    directory = reachable / "gputop-history"
    store = directory / "history.sqlite3"
    recorder = subprocess.Popen(
        [*RECORD, scenario, "--db", str(store), "--readable-by", "all"],
        env={**os.environ, "GPUTOP_FAKE_SPEED": "100", "GPUTOP_STATE_DIR": str(tmp_path)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while samples_in(store) < 60:
            assert recorder.poll() is None, recorder.communicate()[1]
            assert time.monotonic() < deadline, "no samples written"
            time.sleep(0.1)  # polling the store for a condition, not a fixed wait
        modes = files_of(directory)
        assert stat.S_IMODE(directory.stat().st_mode) == 0o755
        assert modes["history.sqlite3"] == (0, 0o644)
        assert modes["history.sqlite3-wal"] == (0, 0o644)  # SQLite gives them the store's mode
        assert modes["history.sqlite3.lock"] == (0, 0o600)  # the recorder's own

        by_user = report_as_other_user(store)
        assert by_user.returncode == 0, by_user.stderr
        rows = json.loads(by_user.stdout)["rows"]
        assert {row["key"] for row in rows} == {"alice", "bob", "carol"}
        # the dashboard's H reads the store GPUTOP_HISTORY_DB names, as that user
        dashboard = python_as_other_user(READ_AS_DASHBOARD, {"GPUTOP_HISTORY_DB": str(store)})
        assert dashboard.returncode == 0, dashboard.stderr
        card = json.loads(dashboard.stdout)
        assert (card["problem"], sorted(card["holders"]), card["series"]) == (
            None,
            ["alice", "bob"],
            True,
        )
        written_before = samples_in(store)
        by_gpu = report_as_other_user(store, "--by", "gpu")
        assert by_gpu.returncode == 0, by_gpu.stderr
        # nothing created or changed by the reader, and the recorder went on writing
        assert files_of(directory) == modes
        deadline = time.monotonic() + WAIT_S
        while samples_in(store) <= written_before:
            assert time.monotonic() < deadline, "the recorder stopped writing"
            time.sleep(0.1)
    finally:
        recorder.send_signal(signal.SIGTERM)
        _, said = recorder.communicate(timeout=WAIT_S)
    assert recorder.returncode == 0, said
    assert "readable by all" in said and "stopped after" in said
    # stopped: SQLite removed its -wal and -shm; the other user still reads the main file
    assert set(os.listdir(directory)) == {"history.sqlite3", "history.sqlite3.lock"}
    again = report_as_other_user(store)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["rows"]
    assert set(os.listdir(directory)) == {"history.sqlite3", "history.sqlite3.lock"}


def test_a_group_shared_store_is_read_by_its_group_and_a_private_one_by_nobody_else(
    reachable: Path, tmp_path: Path
) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    group = grp.getgrgid(OTHER_GID).gr_name  # the other user's own group (nogroup)
    shared = reachable / "by-group" / "history.sqlite3"
    recorded = subprocess.run(
        [*RECORD, scenario, "--db", str(shared), "--readable-by", group, "--count", "3"],
        env={**os.environ, "GPUTOP_FAKE_SPEED": "100", "GPUTOP_STATE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert recorded.returncode == 0, recorded.stderr
    info = shared.parent.stat()
    assert (stat.S_IMODE(info.st_mode), info.st_gid) == (0o750, OTHER_GID)
    assert files_of(shared.parent)["history.sqlite3"] == (0, 0o640)
    assert shared.stat().st_gid == OTHER_GID
    read = report_as_other_user(shared)
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["rows"]

    # a recorder may share its store only with a group it belongs to
    sticky = reachable / "sticky"
    sticky.mkdir(mode=0o1777)
    sticky.chmod(0o1777)
    outsider = gputop_as_other_user(
        "record", "--fake", "demo", "--count", "1", "--db", str(sticky / "h" / "history.sqlite3"),
        "--readable-by", grp.getgrgid(0).gr_name,
        env={"HOME": "/nonexistent", "GPUTOP_STATE_DIR": str(sticky / "state")},
    )  # fmt: skip
    assert outsider.returncode == 1
    assert "operation not permitted (you must be a member of that group)" in outsider.stderr
    assert "Traceback" not in outsider.stderr

    private = reachable / "private" / "history.sqlite3"
    record_stepped(scenario, private, 3)  # without --readable-by: 0700 and 0600, as before
    assert stat.S_IMODE(private.parent.stat().st_mode) == 0o700
    refused = report_as_other_user(private)
    assert refused.returncode != 0
    assert f"Cannot open the history store {private}: permission denied" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_reader_refuses_a_store_others_could_have_changed(
    reachable: Path, tmp_path: Path
) -> None:
    store = reachable / "history" / "history.sqlite3"
    record_stepped(holders_scenario(tmp_path / "holders.json"), store, 3)
    # another user's stopped store, read by root: fine, and nothing created beside it
    for path in (store.parent, store):
        os.chown(path, OTHER_UID, OTHER_GID)
    store.chmod(0o644)
    store.parent.chmod(0o755)
    connection = open_for_reading(store)
    assert connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 3
    connection.close()
    assert os.listdir(store.parent) == ["history.sqlite3"]
    for path in (store.parent, store):
        os.chown(path, 0, 0)
    open_for_reading(store).close()  # root's own: fine too

    def refusal() -> str:
        with pytest.raises(HistoryError) as refused:
            open_for_reading(store).close()
        return str(refused.value)

    store.chmod(0o664)
    assert "writable by other users than its owner (mode 0664)" in refusal()
    store.chmod(0o644)
    store.parent.chmod(0o777)
    assert "history store's directory" in refusal() and "(mode 0777)" in refusal()
    store.parent.chmod(0o755)
    (reachable / "link").symlink_to(store.parent)
    with pytest.raises(HistoryError, match="is a link or not a directory"):
        open_for_reading(reachable / "link" / "history.sqlite3")
    wal = Path(f"{store}-wal")
    wal.write_bytes(b"")
    os.chown(wal, OTHER_UID, OTHER_GID)
    assert "belongs to" in refusal() and "not to the store's owner" in refusal()
    wal.unlink()
    os.chown(store.parent, OTHER_UID, OTHER_GID)
    assert "who could replace it" in refusal()
    os.chown(store.parent, 0, 0)
    connection = sqlite3.connect(store)
    connection.execute("CREATE VIEW planted AS SELECT 1")
    connection.commit()
    connection.close()
    assert "view 'planted'" in refusal()


def test_readable_by_is_refused_where_it_cannot_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(tmp_path / "state"))
    assert main(["record", "--fake", "demo", "--readable-by", "all", "--count", "1"]) == 2
    said = capsys.readouterr().err
    assert "--readable-by: the store is in gputop's state directory" in said
    store = str(tmp_path / "shared" / "history.sqlite3")
    assert main(["record", "--fake", "demo", "--db", store, "--readable-by", "no-such-grp"]) == 2
    assert "--readable-by: no group named 'no-such-grp'" in capsys.readouterr().err
    assert not (tmp_path / "shared").exists()
    # GPUTOP_HISTORY_DB is a place of the user's choosing, like --db: an open one is refused
    (tmp_path / "open").mkdir(mode=0o755)
    (tmp_path / "open").chmod(0o755)
    monkeypatch.setenv("GPUTOP_HISTORY_DB", str(tmp_path / "open" / "history.sqlite3"))
    assert main(["record", "--fake", "demo", "--count", "1"]) == 2
    assert "is open to other users (mode 0755)" in capsys.readouterr().err
    assert stat.S_IMODE((tmp_path / "open").stat().st_mode) == 0o755
