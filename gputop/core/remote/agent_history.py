"""The agent's answer to a ``history_request`` line on its stdin: what ``gputop report
--json`` would say on its host, from the host's history store, written as one ``history``
line after its next snapshot (docs/lab.md has both lines' fields; docs/history.md).

Every field of a request is checked (it comes from the network); a bad one is answered
with an error naming it, never a traceback. The window ends at the agent's sampling clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import sqlite3
import threading
from pathlib import Path
from typing import IO, Any

from gputop.core.errors import GputopError
from gputop.core.history.report import (
    DEFAULT_IDLE_MIN_S,
    ReportBy,
    ReportQuery,
    ReportRow,
    build_report,
    report_to_json,
)
from gputop.core.history.series import GpuSeries, card_series
from gputop.core.history.spans import MIN_IDLE_RUN_S
from gputop.core.history.store import default_history_path, open_for_reading
from gputop.core.numbers import DECODE_ERRORS, MAX_MEMORY_BYTES, outside_float, whole_within, within
from gputop.core.records import frozen
from gputop.core.redact import text_for_others
from gputop.core.remote.protocol import MAX_TEXT_CHARS, ProtocolError, decode, encode, host_text

MAX_REQUEST_BYTES = 4096
MAX_PENDING = 8
MAX_WINDOW_S = 366 * 86400.0
MAX_ID = 2**53
MAX_ROWS = 10_000
MIN_COLUMNS, MAX_COLUMNS = 10, 1000


class HistoryRequests:
    """Requests read off the agent's stdin by one thread; the stream's end sets ``closed``."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.closed = threading.Event()
        self._pending: queue.Queue[dict[str, Any]] = queue.Queue(MAX_PENDING)
        threading.Thread(target=self._read, args=(stream,), name="agent-stdin", daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        try:
            while True:
                line = stream.readline(MAX_REQUEST_BYTES + 1)
                if not line:
                    break
                if len(line) > MAX_REQUEST_BYTES or not line.endswith(b"\n"):
                    while line and not line.endswith(b"\n"):  # the rest of a line too long
                        line = stream.readline(MAX_REQUEST_BYTES)
                    continue
                try:
                    message = decode(line)
                except ProtocolError:
                    continue  # not for us: the protocol ignores what it does not know
                if message.type == "history_request":
                    # a flood: the oldest requests are answered, the rest dropped
                    with contextlib.suppress(queue.Full):
                        self._pending.put_nowait(message.body)
        except (OSError, ValueError):
            pass
        self.closed.set()

    def pending(self) -> list[dict[str, Any]]:
        found = []
        while True:
            try:
                found.append(self._pending.get_nowait())
            except queue.Empty:
                return found


def answer(
    request: dict[str, Any], now: float, store: Path | None = None, reader: str | None = None
) -> str:
    """The ``history`` line for one request (its error named in it, if any). ``reader``:
    the user the agent runs for; a command of anyone else's is redacted (redact.py)."""
    request_id = request.get("id")
    if not whole_within(request_id, 0, MAX_ID):
        request_id = None
    series: dict[str, object] | None = None
    try:
        query = _query(request, now)
        columns = _columns(request)
        connection = open_for_reading(store or default_history_path())
        try:
            rows = build_report(connection, query)
            if reader is not None:
                rows = [_for_reader(row, reader) for row in rows]
            if columns is not None and query.physical_index is not None:
                found = card_series(
                    connection, query.since, query.until, columns, query.physical_index, query.uuid
                )
                series = _series_json(found) if found is not None else None
        finally:
            connection.close()
    except (GputopError, sqlite3.Error, OSError) as error:
        return encode("history", id=request_id, report=None, error=str(error), series=None)
    return encode(
        "history",
        id=request_id,
        report=report_to_json(query, rows),
        error=None,
        series=series,
    )


def _for_reader(row: ReportRow, reader: str) -> ReportRow:
    if row.command is None or (row.user == reader and reader != "root"):
        return row
    return dataclasses.replace(row, command=text_for_others(row.command))


def _columns(request: dict[str, Any]) -> int | None:
    columns = request.get("columns")
    if columns is None:
        return None
    if not whole_within(columns, MIN_COLUMNS, MAX_COLUMNS):
        raise GputopError(
            f"history request: 'columns' must be a whole number from {MIN_COLUMNS} "
            f"to {MAX_COLUMNS}, or null"
        )
    return columns


def _series_json(series: GpuSeries) -> dict[str, object]:
    return {
        "physical_index": series.physical_index,
        "utilization_percent": list(series.utilization_percent),
        "memory_used_bytes": list(series.memory_used_bytes),
        "memory_total_bytes": series.memory_total_bytes,
        **{key: list(getattr(series, key)) for key in ACTIVITY_SERIES},
    }


ACTIVITY_SERIES = ("sm_active_percent", "tensor_active_percent", "dram_active_percent")
"""GPM's figures per column (docs/activity.md): absent from an older agent's answer."""


def _query(request: dict[str, Any], now: float) -> ReportQuery:
    window = _number(request.get("window_s"), "window_s", 60.0, MAX_WINDOW_S)
    idle_min = _number(
        request.get("idle_min_s", DEFAULT_IDLE_MIN_S), "idle_min_s", MIN_IDLE_RUN_S, MAX_WINDOW_S
    )
    by_text = request.get("by", "user")
    if not isinstance(by_text, str) or by_text not in {by.value for by in ReportBy}:
        raise GputopError(
            f"history request: 'by' must be user, gpu, job or process, not {by_text!r}"
        )
    card = request.get("physical_index")
    if card is not None and not whole_within(card, 0, 1023):
        raise GputopError("history request: 'physical_index' must be a GPU index or null")
    uuid = request.get("uuid")
    if uuid is not None and not is_card_uuid(uuid):
        raise GputopError("history request: 'uuid' must be a GPU's UUID or null")
    return ReportQuery(
        now - window, now, ReportBy(by_text), idle_min, card, None if card is None else uuid
    )


MAX_UUID_CHARS = 96
"""NVML's UUIDs are 40 characters ("GPU-" and 36), a MIG instance's at most 56."""


def is_card_uuid(text: object) -> bool:
    """Whether ``text`` may be a card's UUID in a history request: short, and only
    letters, digits and ``-_./`` (what NVML's UUIDs are made of)."""
    return (
        isinstance(text, str)
        and 0 < len(text) <= MAX_UUID_CHARS
        and all(c.isascii() and (c.isalnum() or c in "-_./") for c in text)
    )


def _number(value: object, name: str, minimum: float, maximum: float) -> float:
    number = outside_float(value)
    if number is None:
        raise GputopError(f"history request: {name!r} must be a number of seconds")
    if not within(number, minimum, maximum):
        raise GputopError(
            f"history request: {name!r} must be from {minimum:g} to {maximum:g} seconds"
        )
    return number


# --- the asking side (HostLink) --------------------------------------------------------


@frozen
class HistoryAnswer:
    """An agent's answer, checked where it enters: rows with finite, non-negative figures."""

    rows: tuple[ReportRow, ...] | None
    error: str | None
    series: GpuSeries | None = None
    """The card's readings over the window, where asked for (``columns``) and recorded."""


def answer_from_json(body: dict[str, Any]) -> HistoryAnswer:
    error = body.get("error")
    report = body.get("report")
    rows = report.get("rows") if isinstance(report, dict) else None
    if not isinstance(rows, list):
        said = host_text(error)
        return HistoryAnswer(None, "no report in the answer" if said is None else said)
    return HistoryAnswer(
        tuple(row for row in map(_row_from_json, rows[:MAX_ROWS]) if row),
        None,
        _series_from_json(body.get("series")),
    )


def _series_from_json(document: object) -> GpuSeries | None:
    """A card's series from another machine: slices that are not a reading in range are
    unknown (a gap), a series of the wrong shape is none at all."""
    if not isinstance(document, dict):
        return None
    index = document.get("physical_index")
    utilization, memory = document.get("utilization_percent"), document.get("memory_used_bytes")
    if (
        not whole_within(index, 0, 1023)
        or not isinstance(utilization, list)
        or not isinstance(memory, list)
        or not 0 < len(utilization) <= MAX_COLUMNS
        or len(memory) != len(utilization)
    ):
        return None
    total = _reading(document.get("memory_total_bytes"), MAX_MEMORY_BYTES)
    activity = [
        tuple(_reading(v, 100.0) for v in values)
        if isinstance(values := document.get(key), list) and len(values) == len(utilization)
        else ()
        for key in ACTIVITY_SERIES
    ]
    return GpuSeries(
        index,
        None,
        tuple(_reading(value, 100.0) for value in utilization),
        tuple(_reading(value, MAX_MEMORY_BYTES) for value in memory),
        None if total is None else int(total),
        *activity,
    )


def _reading(value: object, top: float) -> float | None:
    number = _seconds(value)
    return number if number is not None and number <= top else None


def _row_from_json(document: object) -> ReportRow | None:
    if not isinstance(document, dict):
        return None
    key = document.get("key")
    gpu_s = _seconds(document.get("gpu_seconds"))
    idle_s = _seconds(document.get("idle_held_seconds"))
    if isinstance(key, bool) or not isinstance(key, (str, int)) or gpu_s is None or idle_s is None:
        return None
    mean = _seconds(document.get("mean_memory_bytes"))
    peak = _seconds(document.get("peak_memory_bytes"))
    sm = _seconds(document.get("mean_sm_util"))
    user, command = document.get("user"), document.get("command")
    return ReportRow(
        key=key[:MAX_TEXT_CHARS] if isinstance(key, str) else key,
        gpu_seconds=gpu_s,
        idle_held_seconds=idle_s,
        mean_memory_bytes=None if mean is None else int(mean),
        peak_memory_bytes=None if peak is None else int(peak),
        mean_sm_util=None if sm is None else min(sm, 100.0),
        user=host_text(user),
        command=host_text(command),
    )


def _seconds(value: object) -> float | None:
    """A number from another machine: finite and not negative, else unknown."""
    number = outside_float(value)  # 10**400: infinite, so unknown
    return number if within(number, 0, 1e300) else None


class HistoryAnswers:
    """Answers that arrived, by request id, until asked for (at most ``MAX_PENDING``)."""

    def __init__(self, changed: threading.Condition) -> None:
        self._changed = changed
        self._next_id = 0
        self._answers: dict[int, HistoryAnswer] = {}

    def next_id(self) -> int:
        """Call with the condition held."""
        self._next_id += 1
        return self._next_id

    def arrived(self, body: dict[str, Any]) -> None:
        request_id = body.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, int):
            return
        try:
            answer = answer_from_json(body)
        except DECODE_ERRORS as error:  # the host's fault, said as its answer's error
            answer = HistoryAnswer(None, f"the host's answer could not be read ({error})")
        with self._changed:
            self._answers[request_id] = answer
            while len(self._answers) > MAX_PENDING:
                del self._answers[min(self._answers)]
            self._changed.notify_all()

    def wait(self, request_id: int, timeout_s: float) -> HistoryAnswer | None:
        with self._changed:
            self._changed.wait_for(lambda: request_id in self._answers, timeout_s)
            return self._answers.pop(request_id, None)
