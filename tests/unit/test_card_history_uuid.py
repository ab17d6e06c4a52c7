"""``H`` on a card finds the card's history by its UUID, not by its index: a replaced or
renumbered card does not inherit another card's history (docs/history.md)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

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


def agent_answer(store: Path, now: float, **request: object) -> dict[str, Any]:
    from gputop.core.remote.agent_history import answer

    asked = {"type": "history_request", "id": 1, "window_s": 3600, "columns": 40, **request}
    return json.loads(answer(asked, now, store))


def test_a_lab_hosts_agent_finds_the_card_by_its_uuid(tmp_path: Path) -> None:
    """The lab's ``H`` on a remote card: the agent, told the card's UUID, answers with that
    card's history, and none for another card at a recorded index."""
    store, now = recorded(tmp_path)
    other = agent_answer(store, now, physical_index=0, uuid=OTHER_CARD)
    assert other["error"] is None
    assert other["series"] is None and other["report"]["rows"] == []
    same = agent_answer(store, now, physical_index=0, uuid=RECORDED_GPU_0)
    assert same["series"]["physical_index"] == 0
    assert [row["key"] for row in same["report"]["rows"]] == ["alice"]
    moved = agent_answer(store, now, physical_index=0, uuid=RECORDED_GPU_1)
    assert max(value for value in moved["series"]["memory_used_bytes"] if value) == 14 * 2**30
    assert sorted(row["key"] for row in moved["report"]["rows"]) == ["alice", "bob"]
    # without a UUID (an older lab): by index, as before
    unnamed = agent_answer(store, now, physical_index=0)
    assert [row["key"] for row in unnamed["report"]["rows"]] == ["alice"]


def test_a_bad_uuid_in_a_request_is_named_in_the_answer(tmp_path: Path) -> None:
    store, now = recorded(tmp_path)
    for bad in (7, "x" * 200, "GPU-\x1b[31m"):
        found = agent_answer(store, now, physical_index=0, uuid=bad)
        assert found["report"] is None
        assert "'uuid'" in found["error"]


def test_the_lab_asks_a_host_for_the_card_by_its_uuid(tmp_path: Path) -> None:
    """``remote_card_history`` sends the card's UUID; the answer (the agent's own, from the
    recorded store) is then that card's, not the history of the card once at its index."""
    from gputop.core.remote.agent_history import answer, answer_from_json
    from gputop.core.remote.host_link import HostLink
    from gputop.core.remote.lab_history import HistoryAsk, remote_card_history
    from gputop.core.remote.status import HostStatus, LinkState, Mode

    store, now = recorded(tmp_path)
    asked: list[dict[str, object]] = []

    class RecordedHost(HostLink):
        def __init__(self) -> None:  # no ssh: the agent's answer, from the store
            pass

        def request_history(
            self, window_s, by="user", physical_index=None, columns=None, uuid=None
        ):
            asked.append({"window_s": window_s, "by": by, "physical_index": physical_index})
            asked[-1].update({"columns": columns, "uuid": uuid, "id": len(asked)})
            return len(asked)

        def history_answer(self, request_id, timeout_s):
            request = {
                key: value for key, value in asked[request_id - 1].items() if value is not None
            }
            return answer_from_json(json.loads(answer(request, now, store)))

    status = HostStatus("node1", LinkState.LIVE, Mode.FULL)
    other = remote_card_history(
        RecordedHost(), status, HistoryAsk(0, 3600.0, now, 40, uuid=OTHER_CARD)
    )
    assert asked[-1]["uuid"] == OTHER_CARD
    assert other.problem is None and other.series is None and other.holders == ()
    same = remote_card_history(
        RecordedHost(), status, HistoryAsk(0, 3600.0, now, 40, uuid=RECORDED_GPU_0)
    )
    assert same.series is not None and [row.key for row in same.holders] == ["alice"]
    odd = remote_card_history(
        RecordedHost(), status, HistoryAsk(0, 3600.0, now, 40, uuid="GPU \x1b")
    )
    assert asked[-1]["uuid"] is None  # not a UUID: asked by index, as before
    assert [row.key for row in odd.holders] == ["alice"]
