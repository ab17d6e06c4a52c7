"""The lab agent answers a history request with its host's report (docs/history.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers.history import holders_scenario, record_stepped

from gputop.core.history.store import default_history_path

WAIT_S = 30.0


def history_answers(scenario: str, *requests: dict[str, Any] | str) -> list[dict[str, Any]]:
    """Start ``gputop agent``, send the requests, read until each has its answer."""
    agent = subprocess.Popen(
        [sys.executable, "-m", "gputop", "agent", "--fake", scenario, "--interval", "0.2"],
        env={**os.environ, "GPUTOP_FAKE_TIME": "3600"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert agent.stdin is not None and agent.stdout is not None
    try:
        for request in requests:
            line = request if isinstance(request, str) else json.dumps(request)
            agent.stdin.write(line + "\n")
        agent.stdin.flush()
        answers = []
        expected = sum(1 for request in requests if not isinstance(request, str))
        while len(answers) < expected:
            line = agent.stdout.readline()
            assert line, "the agent stopped before answering"
            message = json.loads(line)
            if message["type"] == "history":
                answers.append(message)
        agent.stdin.close()
        assert agent.wait(timeout=WAIT_S) == 0
        return answers
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()


def test_the_agent_answers_with_its_hosts_report(tmp_path: Path) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=720)  # the hour to t=3600 s
    answer, card = history_answers(
        scenario,
        {"type": "history_request", "id": 7, "window_s": 3600, "by": "user"},
        {"type": "history_request", "id": 8, "window_s": 3600, "physical_index": 1, "columns": 12},
    )
    assert answer["id"] == 7 and answer["error"] is None
    rows = answer["report"]["rows"]
    assert rows[0]["key"] == "bob"
    assert abs(rows[0]["idle_held_seconds"] - 3600) <= 5
    assert answer["series"] is None  # not asked for
    # the lab's H: the card's readings in 12 slices of the hour, and its holders
    series = card["series"]
    assert card["id"] == 8 and series["physical_index"] == 1
    assert len(series["utilization_percent"]) == len(series["memory_used_bytes"]) == 12
    assert series["memory_used_bytes"] == [14 * 2**30] * 12  # the scenario card's 14 GiB
    assert [row["key"] for row in card["report"]["rows"]] == ["bob", "alice"]


def test_a_bad_request_is_answered_with_what_is_wrong_and_noise_is_ignored(
    tmp_path: Path,
) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=12)
    answers = history_answers(
        scenario,
        "not json at all",
        '{"type": "something newer"}',
        {"type": "history_request", "id": 1, "window_s": float("inf")},
        {"type": "history_request", "id": 2, "window_s": 3600, "by": "cheese"},
        {"type": "history_request", "id": 3, "window_s": 3600, "physical_index": -1},
        {"type": "history_request", "id": 4, "window_s": 3600, "physical_index": 0, "columns": 9},
    )
    assert [answer["id"] for answer in answers] == [1, 2, 3, 4]
    assert all(answer["report"] is None for answer in answers)
    assert "'window_s' must be from 60 to" in answers[0]["error"]
    assert "'by' must be user, gpu, job or process, not 'cheese'" in answers[1]["error"]
    assert "'physical_index' must be a GPU index" in answers[2]["error"]
    assert "'columns' must be a whole number from 10 to 1000" in answers[3]["error"]


def test_without_a_store_the_answer_says_how_to_start_one(tmp_path: Path) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    (answer,) = history_answers(scenario, {"type": "history_request", "id": 1, "window_s": 3600})
    assert answer["report"] is None
    assert "start 'gputop record'" in answer["error"]


def test_an_answer_from_another_machine_keeps_only_well_formed_rows() -> None:
    from gputop.core.remote.agent_history import answer_from_json

    good = {"key": "bob", "gpu_seconds": 60, "idle_held_seconds": 0, "mean_sm_util": 250}
    answer = answer_from_json(
        {
            "id": 1,
            "report": {
                "rows": [
                    good,
                    {"key": True, "gpu_seconds": 1, "idle_held_seconds": 0},
                    {"key": "eve", "gpu_seconds": float("nan"), "idle_held_seconds": 0},
                    {"key": "mallory", "gpu_seconds": -5, "idle_held_seconds": 0},
                    "not a row",
                    {
                        "key": "trudy",
                        "gpu_seconds": 1,
                        "idle_held_seconds": 0,
                        "peak_memory_bytes": float("inf"),
                    },
                ]
            },
        }
    )
    assert answer.rows is not None
    assert [row.key for row in answer.rows] == ["bob", "trudy"]
    assert answer.rows[0].mean_sm_util == 100.0
    assert answer.rows[1].peak_memory_bytes is None
    assert answer_from_json({"id": 2, "report": None, "error": "no store"}).error == "no store"


def test_a_cards_series_from_another_machine_is_checked_where_it_enters() -> None:
    from gputop.core.remote.agent_history import answer_from_json

    def series(**document: object) -> object:
        base: dict[str, object] = {
            "physical_index": 2,
            "utilization_percent": [50, float("nan"), -1, 101, None],
            "memory_used_bytes": [2**30, 2**61, float("inf"), "x", 0],
            "memory_total_bytes": -4,
        }
        base.update(document)
        return answer_from_json({"id": 1, "report": {"rows": []}, "series": base}).series

    checked = series()
    assert checked is not None and checked.physical_index == 2
    assert checked.utilization_percent == (50.0, None, None, None, None)
    assert checked.memory_used_bytes == (float(2**30), None, None, None, 0.0)
    assert checked.memory_total_bytes is None
    assert series(memory_used_bytes=[1, 2]) is None  # not one reading a slice
    assert series(physical_index=True) is None
    assert series(utilization_percent=[0] * 1001, memory_used_bytes=[0] * 1001) is None
    assert answer_from_json({"id": 1, "report": {"rows": []}, "series": "odd"}).series is None
