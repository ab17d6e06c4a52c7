"""``H`` on a card finds the card's history by its UUID, not by its index: a replaced or
renumbered card does not inherit another card's history (docs/history.md)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from helpers.history import holders_scenario, record_stepped

from gputop.core.history.card_history import read_card_history
from gputop.core.sampling.source import open_backend
from gputop.tui.screens.card_history import CardHistoryScreen, render_card_history

RECORDED_GPU_0 = "GPU-11111111-aaaa-bbbb-cccc-000000000000"
RECORDED_GPU_1 = "GPU-11111111-aaaa-bbbb-cccc-000000000001"
OTHER_CARD = "GPU-22222222-dddd-eeee-ffff-000000000000"


def recorded(tmp_path: Path) -> tuple[Path, float]:
    """The holders scenario recorded for two minutes; the store and a time just after."""
    store = tmp_path / "history.db"
    record_stepped(holders_scenario(tmp_path / "holders.json"), store, samples=24)
    connection = sqlite3.connect(store)
    try:
        (last,) = connection.execute("SELECT MAX(t) FROM samples").fetchone()
    finally:
        connection.close()
    return store, float(last) + 1.0


def gpu_0_of(tmp_path: Path, uuid: str) -> str:
    """GPU 0's UUID as the dashboard sees it, on a machine whose GPU 0 is ``uuid``."""
    path = Path(holders_scenario(tmp_path / "other.json"))
    document = json.loads(path.read_text())
    document["gpus"][0]["uuid"] = uuid
    path.write_text(json.dumps(document))
    backend = open_backend(str(path), environ={"GPUTOP_FAKE_TIME": "0"})
    try:
        (card,) = [gpu for gpu in backend.sample().gpus if gpu.physical_index == 0]
    finally:
        backend.close()
    assert card.uuid == uuid
    return card.uuid


def test_another_card_at_the_same_index_has_no_history(tmp_path: Path) -> None:
    store, now = recorded(tmp_path)
    screen = CardHistoryScreen(0, store, uuid=gpu_0_of(tmp_path, OTHER_CARD))
    found = screen.read_history(3600.0, now, 40)
    assert found.series is None
    assert found.holders == ()
    assert "Nothing was recorded for this card" in render_card_history(found).plain


def test_the_same_card_shows_its_history(tmp_path: Path) -> None:
    store, now = recorded(tmp_path)
    screen = CardHistoryScreen(0, store, uuid=gpu_0_of(tmp_path, RECORDED_GPU_0))
    found = screen.read_history(3600.0, now, 40)
    assert found.series is not None
    assert found.series.uuid == RECORDED_GPU_0
    assert [row.key for row in found.holders] == ["alice"]
    assert found.holders[0].peak_memory_bytes == 20 * 1024**3


def test_a_renumbered_card_keeps_its_own_history(tmp_path: Path) -> None:
    """GPU 1 of the recording, now GPU 0: its own readings and holders (alice's eval and
    bob's notebook), not those of the card that was GPU 0."""
    store, now = recorded(tmp_path)
    found = read_card_history(store, 0, 3600.0, now, 40, uuid=RECORDED_GPU_1)
    assert found.series is not None
    assert found.series.uuid == RECORDED_GPU_1
    assert found.series.physical_index == 0
    known = [value for value in found.series.memory_used_bytes if value is not None]
    assert known and max(known) == 14 * 1024**3
    assert sorted(str(row.key) for row in found.holders) == ["alice", "bob"]
    alice = next(row for row in found.holders if row.key == "alice")
    assert alice.peak_memory_bytes == 4 * 1024**3


def test_rows_without_a_uuid_fall_back_to_the_index(tmp_path: Path) -> None:
    """An older store's rows that name no card: the index is all there is."""
    store, now = recorded(tmp_path)
    connection = sqlite3.connect(store)
    connection.execute("UPDATE gpu_samples SET uuid_id = NULL")
    connection.commit()
    connection.close()
    found = read_card_history(store, 0, 3600.0, now, 40, uuid=OTHER_CARD)
    assert found.series is not None
    assert [row.key for row in found.holders] == ["alice"]
    assert read_card_history(store, 0, 3600.0, now, 40).series is not None
