"""Who used the cards and who held them idle, from the history store's process spans.

For each holder (a user, a GPU, a job or a process) and each card it held, its spans in the
window (clipped to it) give the figures docs/history.md defines (``gpu_seconds``, the
time-weighted means, ``peak_memory_bytes``, ``idle_held_seconds``). Spans are cut where a
process's idleness changes, so every figure is a sum of recorded samples. Numbers read back
from the store are checked (finite, not negative) before use.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import itertools
import os
import sqlite3
import stat
from collections.abc import Iterable

from gputop.core.history.series import read_back
from gputop.core.history.spans import SAME_TIME_S, decode_runs
from gputop.core.numbers import MAX_PID, whole_within
from gputop.core.records import frozen
from gputop.core.redact import READ_COMMAND_CHARS, kept_text

DEFAULT_IDLE_MIN_S = 30 * 60.0


class ReportBy(str, enum.Enum):
    USER = "user"
    GPU = "gpu"
    JOB = "job"
    PROCESS = "process"


_HOLDER = {
    ReportBy.USER: "COALESCE(users.text, '?')",
    ReportBy.GPU: "p.physical_index",
    ReportBy.JOB: "CASE typeof(r.job) WHEN 'text' THEN r.job ELSE '?' END",  # '?': set by hand
    ReportBy.PROCESS: "r.id",
}


@frozen
class ReportQuery:
    since: float
    until: float
    by: ReportBy = ReportBy.USER
    idle_min_s: float = DEFAULT_IDLE_MIN_S
    physical_index: int | None = None
    """Only what was held on this card (the dashboard's history of one card)."""
    uuid: str | None = None
    """With ``physical_index``: the card is the one with this UUID, wherever it was. A span
    counts where the samples it covers put this UUID at its index; one whose samples name
    no card (an older recorder's) counts where the index matches."""


@frozen
class ReportRow:
    key: str | int
    """The user name, the GPU's physical index, the job, or the pid."""
    gpu_seconds: float
    idle_held_seconds: float
    mean_memory_bytes: int | None
    peak_memory_bytes: int | None
    mean_sm_util: float | None
    user: str | None = None
    """For ``--by process``: whose it was, and its command (cleaned when recorded). For
    ``--by job``: whose job it is (a job id is its user's, and one host's: two users'
    ``gputop:1`` are two rows)."""
    command: str | None = None
    start_time: float | None = None
    mean_sm_active_percent: float | None = None
    """GPM's SM active of the cards it held, time-weighted over the seconds it held them
    where GPM answered (docs/activity.md); ``None`` where it never did."""
    mean_tensor_active_percent: float | None = None

    @property
    def idle(self) -> bool:
        return self.idle_held_seconds > 0


@frozen
class _Span:
    """A process span clipped to the window, its sums scaled to the part inside."""

    start_t: float
    end_t: float
    idle_pieces: tuple[tuple[float, float], ...]
    """Where it was idle: (start, end) in epoch seconds, inside the span."""
    memory_byte_seconds: float | None
    peak_memory_bytes: float | None
    sm_percent_seconds: float | None


class Sums:
    """What the report sums for one holder over its cards (the store's spans here,
    Prometheus's steps in prometheus_report.py), and the row they give."""

    def __init__(self) -> None:
        self.gpu_seconds = self.idle_s = 0.0
        self.memory_sum = self.memory_weight = 0.0
        self.sm_sum = self.sm_weight = 0.0
        self.peak: float | None = None
        self.activity = {"sm_active": [0.0, 0.0], "tensor_active": [0.0, 0.0]}
        """Per GPM figure: percent-seconds and seconds known."""

    def report_row(
        self, key: str | int, user: str | None = None, command: str | None = None
    ) -> ReportRow:
        return ReportRow(
            key=key,
            gpu_seconds=self.gpu_seconds,
            idle_held_seconds=self.idle_s,
            mean_memory_bytes=round(self.memory_sum / self.memory_weight)
            if self.memory_weight
            else None,
            peak_memory_bytes=int(self.peak) if self.peak is not None else None,
            mean_sm_util=min(100.0, self.sm_sum / self.sm_weight) if self.sm_weight else None,
            user=user,
            command=command,
            mean_sm_active_percent=_mean(*self.activity["sm_active"]),
            mean_tensor_active_percent=_mean(*self.activity["tensor_active"]),
        )


class _Holder(Sums):
    """What is summed for one holder, card by card."""

    def add_activity(self, card: _CardActivity, spans: list[_Span]) -> None:
        sm_sum, sm_known, tc_sum, tc_known = card.integrate(_merged(spans))
        for name, (total, known) in (
            ("sm_active", (sm_sum, sm_known)),
            ("tensor_active", (tc_sum, tc_known)),
        ):
            self.activity[name][0] += total
            self.activity[name][1] += known

    def add_card(self, spans: list[_Span], idle_min_s: float) -> None:
        spans.sort(key=_start)
        if all(later.start_t >= earlier.end_t for earlier, later in itertools.pairwise(spans)):
            self._add_sequence(spans, idle_min_s)  # one process at a time: the usual case
            return
        self.gpu_seconds += _union_s(spans)
        with_memory = [span for span in spans if span.memory_byte_seconds is not None]
        if with_memory:
            self.memory_sum += sum(span.memory_byte_seconds or 0.0 for span in with_memory)
            self.memory_weight += _union_s(with_memory)
        with_sm = [span for span in spans if span.sm_percent_seconds is not None]
        if with_sm:
            self.sm_sum += sum(span.sm_percent_seconds or 0.0 for span in with_sm)
            self.sm_weight += _union_s(with_sm)
        peak, idle_s = _sweep(spans, idle_min_s)
        if peak is not None and (self.peak is None or peak > self.peak):
            self.peak = peak
        self.idle_s += idle_s

    def _add_sequence(self, spans: list[_Span], idle_min_s: float) -> None:
        """Spans that do not overlap, in order: sums, and idle runs joined end to start."""
        run_s = 0.0
        run_end: float | None = None
        for span in spans:
            seconds = span.end_t - span.start_t
            self.gpu_seconds += seconds
            if span.memory_byte_seconds is not None:
                self.memory_sum += span.memory_byte_seconds
                self.memory_weight += seconds
            if span.sm_percent_seconds is not None:
                self.sm_sum += span.sm_percent_seconds
                self.sm_weight += seconds
            peak = span.peak_memory_bytes
            if peak is not None and (self.peak is None or peak > self.peak):
                self.peak = peak
            for start, end in span.idle_pieces:
                if run_end is None or abs(start - run_end) > SAME_TIME_S:
                    self.idle_s += idle_counted(run_s, idle_min_s)
                    run_s = 0.0
                run_s += end - start
                run_end = end
        self.idle_s += idle_counted(run_s, idle_min_s)


def _start(span: _Span) -> float:
    return span.start_t


def _merged(spans: list[_Span]) -> list[tuple[float, float]]:
    """The seconds the spans cover, as sorted intervals that do not overlap."""
    intervals: list[tuple[float, float]] = []
    for span in sorted(spans, key=_start):
        if intervals and span.start_t <= intervals[-1][1]:
            intervals[-1] = (intervals[-1][0], max(intervals[-1][1], span.end_t))
        else:
            intervals.append((span.start_t, span.end_t))
    return intervals


class _CardActivity:
    """One card's recorded GPM SM active and tensor active in the window, in time order:
    each sample holds for the ``duration_s`` before its ``t`` (docs/history.md)."""

    def __init__(self, connection: sqlite3.Connection, card: int, since: float, until: float):
        rows = connection.execute(
            "SELECT s.t - s.duration_s, s.t, "
            f"{CHECKED.format('g.sm_active_percent')}, "
            f"{CHECKED.format('g.tensor_active_percent')} "
            "FROM samples s JOIN gpu_samples g ON g.sample_id = s.id "
            "WHERE g.physical_index = ? AND s.t > ? AND s.t - s.duration_s < ? "
            "AND s.t BETWEEN 0 AND 1e300 AND s.duration_s BETWEEN 0 AND 1e300 "
            "AND (g.sm_active_percent IS NOT NULL OR g.tensor_active_percent IS NOT NULL) "
            "ORDER BY s.t",
            (card, since, until),
        )
        self.samples = [(start, end, _capped(sm), _capped(tc)) for start, end, sm, tc in rows]

    def integrate(self, intervals: list[tuple[float, float]]) -> tuple[float, float, float, float]:
        """Percent-seconds and known seconds of SM active, then tensor active, over
        ``intervals`` (sorted, not overlapping): one sweep of both lists."""
        sm_sum = sm_known = tc_sum = tc_known = 0.0
        position = 0
        samples = self.samples
        for start, end in intervals:
            while position < len(samples) and samples[position][1] <= start:
                position += 1
            look = position
            while look < len(samples) and samples[look][0] < end:
                sample_start, sample_end, sm, tc = samples[look]
                overlap = min(end, sample_end) - max(start, sample_start)
                if overlap > 0:
                    if sm is not None:
                        sm_sum += sm * overlap
                        sm_known += overlap
                    if tc is not None:
                        tc_sum += tc * overlap
                        tc_known += overlap
                look += 1
        return sm_sum, sm_known, tc_sum, tc_known


def _union_s(spans: list[_Span]) -> float:
    """Seconds covered by at least one span (a holder holds a card once, however many of
    its processes are on it)."""
    return sum(end - start for start, end in _merged(spans))


def idle_counted(run_s: float, idle_min_s: float) -> float:
    """The report's idle rule, for the store's spans and for Prometheus's steps alike: an
    unbroken stretch in which every process on the card was idle counts whole once it lasts
    ``idle_min_s``, else not at all."""
    return run_s if run_s >= idle_min_s else 0.0


def _sweep(spans: list[_Span], idle_min_s: float) -> tuple[float | None, float]:
    """The most memory held at once (the sum of the peaks of spans that overlap) and the
    seconds of idle stretches of at least ``idle_min_s``: unbroken stretches in which every
    span that covers them is idle."""
    # (time, change, idle?, peak): in time order, ends before starts at the same time
    events: list[tuple[float, int, int, float]] = []
    for span in spans:
        span_peak = span.peak_memory_bytes or 0.0
        events.append((span.start_t, 1, 0, span_peak))
        events.append((span.end_t, -1, 0, span_peak))
        for start, end in span.idle_pieces:
            events.append((start, 1, 1, 0.0))
            events.append((end, -1, 1, 0.0))
    events.sort()
    active = idle_active = 0
    peak_now = 0.0
    peak: float | None = None
    idle_total = run_s = 0.0
    last_t: float | None = None
    for t, change, idle, piece_peak in events:
        if last_t is not None and t > last_t:
            if active > 0 and idle_active >= active:
                run_s += t - last_t
            else:
                idle_total += idle_counted(run_s, idle_min_s)
                run_s = 0.0
        if idle:
            idle_active += change
        else:
            active += change
            peak_now += change * piece_peak
            if change > 0:
                peak = peak_now if peak is None else max(peak, peak_now)
        last_t = t
    idle_total += idle_counted(run_s, idle_min_s)
    if not any(span.peak_memory_bytes is not None for span in spans):
        peak = None
    return peak, idle_total


_COVERED = (
    "SELECT 1 FROM samples s JOIN gpu_samples g ON g.sample_id = s.id "
    "WHERE g.physical_index = p.physical_index AND s.t > p.start_t AND s.t <= p.end_t "
)
_ONLY_THIS_CARD = (
    f"AND (EXISTS ({_COVERED}AND g.uuid_id = (SELECT id FROM strings WHERE text = ?)) "
    f"OR (p.physical_index = ? AND NOT EXISTS ({_COVERED}AND g.uuid_id IS NOT NULL)))"
)
"""A span on the card with a UUID: a sample it covers put the UUID at its index (spans keep
the index only, and a card keeps its UUID while a process holds it); or, where none of
them named a card, the index is the card's."""

_Key = str | int | tuple[str, str]
"""A holder: a user, a GPU index, a process's row id, or (job, its user)."""

CHECKED = "CASE WHEN {0} BETWEEN 0 AND 1e300 THEN {0} END"
"""A number read back from the store, checked where it enters: finite (SQLite keeps no NaN)
and not negative, else unknown; a text where a number belongs is unknown too."""


_DISPLAY_PROGRAMS = (
    "Xorg X Xwayland gnome-shell gdm-x-session kwin_x11 kwin_wayland plasmashell mutter sway "
    "weston Hyprland cinnamon xfwm4 compiz"
)
DISPLAY_SERVERS = frozenset(_DISPLAY_PROGRAMS.split())
"""Display servers and desktop shells: they hold a little memory on the card that drives a
screen, by design. They are never idle holders (a display server is not a hog)."""


def is_display_server(command: str | None) -> bool:
    """Whether a recorded command line starts a display server (its program's base name)."""
    if not command:
        return False
    program = command.split(maxsplit=1)[0].rsplit("/", 1)[-1]
    return program in DISPLAY_SERVERS


COMMAND_READ = f"substr(commands.text, 1, {READ_COMMAND_CHARS + 1})"
"""A process's command as a report reads it (``redact.kept_text`` shows it): a store
written before the recorder kept commands to a bound holds 2 MB ones, which were read for
every span of the process, held in its row and printed whole."""


def build_report(connection: sqlite3.Connection, query: ReportQuery) -> list[ReportRow]:
    """The rows of the report, idle holders first, then by GPU time. By GPU: every card
    sampled in the window, a card nobody used included (with no GPU time)."""
    holder = _HOLDER[query.by]
    only_jobs = "AND r.job IS NOT NULL" if query.by is ReportBy.JOB else ""
    only_card = "AND p.physical_index = ?" if query.physical_index is not None else ""
    chosen: tuple[object, ...] = () if query.physical_index is None else (query.physical_index,)
    if query.physical_index is not None and query.uuid is not None:
        only_card, chosen = _ONLY_THIS_CARD, (query.uuid, query.physical_index)
    rows = connection.execute(
        f"SELECT {holder} AS holder, COALESCE(users.text, '?'), p.physical_index, p.start_t, "
        "p.end_t, p.idle_runs, "
        f"{CHECKED.format('p.memory_byte_seconds')}, {CHECKED.format('p.peak_memory_bytes')}, "
        f"{CHECKED.format('p.sm_percent_seconds')}, {COMMAND_READ} "
        "FROM process_spans p JOIN processes r ON r.id = p.process_id "
        "LEFT JOIN strings users ON users.id = r.user_id "
        "LEFT JOIN strings commands ON commands.id = r.command_id "
        f"WHERE p.end_t > ? AND p.start_t < ? {only_jobs} {only_card} "
        # a damaged row (not numbers, not finite, ending before it starts) counts nothing
        "AND p.start_t BETWEEN 0 AND 1e300 AND p.end_t BETWEEN p.start_t AND 1e300 "
        "AND typeof(p.physical_index) = 'integer' "
        "ORDER BY holder, p.physical_index",
        (query.since, query.until, *chosen),
    )
    since, until = query.since, query.until
    by_card: dict[tuple[_Key, int], list[_Span]] = {}
    for holder_key, owner, card, start, end, runs, memory_s, peak, sm_s, command in rows:
        # a job's id is its user's (each user has a store of jobs): the user is in the key
        key: _Key = (holder_key, owner) if query.by is ReportBy.JOB else holder_key
        if is_display_server(command if isinstance(command, str) else None):
            runs = None  # never an idle holder
        inside_start, inside_end = max(start, since), min(end, until)
        if inside_end <= inside_start:
            continue
        if (inside_start, inside_end) != (start, end):  # scale the sums to the part inside
            fraction = (inside_end - inside_start) / (end - start)
            memory_s = None if memory_s is None else memory_s * fraction
            sm_s = None if sm_s is None else sm_s * fraction
        pieces = _idle_pieces(runs, start, end, inside_start, inside_end) if runs else ()
        span = _Span(inside_start, inside_end, pieces, memory_s, peak, sm_s)
        spans = by_card.get((key, card))
        if spans is None:
            by_card[(key, card)] = [span]
        else:
            spans.append(span)
    holders: dict[_Key, _Holder] = {}
    cards: dict[int, _CardActivity] = {}
    for (key, index), spans in by_card.items():
        summed = holders.setdefault(key, _Holder())
        summed.add_card(spans, query.idle_min_s)
        activity = cards.get(index)
        if activity is None:
            activity = cards[index] = _CardActivity(connection, index, since, until)
        if activity.samples:
            summed.add_activity(activity, spans)
    result = [  # a job's key holds its user
        summed.report_row(*key) if isinstance(key, tuple) else summed.report_row(key)
        for key, summed in holders.items()
    ]
    if query.by is ReportBy.GPU:
        result.extend(_unused_cards(connection, query, set(holders)))
    if query.by is ReportBy.PROCESS:
        result = list(_with_process_facts(connection, result))
    return sorted(result, key=lambda row: (-row.idle_held_seconds, -row.gpu_seconds, str(row.key)))


def _unused_cards(
    connection: sqlite3.Connection, query: ReportQuery, used: set[_Key]
) -> list[ReportRow]:
    """Cards sampled in the window that no process held: a week-long unused card is news."""
    only_card = "AND g.physical_index = ?" if query.physical_index is not None else ""
    card = () if query.physical_index is None else (query.physical_index,)
    sampled = connection.execute(
        "SELECT DISTINCT g.physical_index FROM gpu_samples g JOIN samples s ON s.id = g.sample_id "
        f"WHERE s.t > ? AND s.t - s.duration_s < ? AND typeof(g.physical_index) = 'integer' "
        f"{only_card}",
        (query.since, query.until, *card),
    )
    return [
        ReportRow(index, 0.0, 0.0, None, None, None) for (index,) in sampled if index not in used
    ]


def _idle_pieces(
    runs: object, start: float, end: float, inside_start: float, inside_end: float
) -> tuple[tuple[float, float], ...]:
    """A span's idle runs as (start, end) epoch seconds, clipped to the window."""
    pieces = []
    for offset, length in _decoded(runs, end - start):
        piece_start = max(start + offset, inside_start)
        piece_end = min(start + offset + length, inside_end)
        if piece_end > piece_start:
            pieces.append((piece_start, piece_end))
    return tuple(pieces)


@functools.lru_cache(maxsize=4096)
def _decoded(runs: object, span_s: float) -> tuple[tuple[float, float], ...]:
    """``decode_runs``, once per distinct text and length: most spans of a month share a few
    (a 15-minute span idle in its first sample, a day idle throughout)."""
    return tuple(decode_runs(runs, span_s))


def _capped(percent: float | None) -> float | None:
    return None if percent is None else min(float(percent), 100.0)


def _mean(total: float, seconds: float) -> float | None:
    return min(100.0, total / seconds) if seconds > 0 else None


def _with_process_facts(
    connection: sqlite3.Connection, rows: list[ReportRow]
) -> Iterable[ReportRow]:
    """``--by process``: the key becomes the pid, with the process's user and command.
    A store that is not the reader's own private one gives its commands redacted, whatever
    its recorder kept (docs/security.md)."""
    redact = not _private_to_reader(connection)
    for row in rows:
        found = connection.execute(
            f"SELECT r.pid, r.start_time, users.text, {COMMAND_READ} FROM processes r "
            "LEFT JOIN strings users ON users.id = r.user_id "
            "LEFT JOIN strings commands ON commands.id = r.command_id WHERE r.id = ?",
            (row.key,),
        ).fetchone()
        if found is None:
            continue
        pid, start_time, user, command = found
        yield dataclasses.replace(
            row,
            key=pid if whole_within(pid, 1, MAX_PID) else "?",  # a pid set by hand: unknown
            user=user,
            command=kept_text(command, "redacted" if redact else None),
            start_time=read_back(start_time),
        )


def _private_to_reader(connection: sqlite3.Connection) -> bool:
    """Whether the store's file is this user's and no one else may read it."""
    try:
        files = [row[2] for row in connection.execute("PRAGMA database_list") if row[1] == "main"]
        info = os.stat(files[0]) if files and files[0] else None
    except (sqlite3.Error, OSError):
        return False
    if info is None:
        return True  # an in-memory store: made by this process
    return info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) & 0o077 == 0


JSON_SCHEMA = 1
ROW_FIELDS = (
    "key",
    "gpu_seconds",
    "idle_held_seconds",
    "mean_memory_bytes",
    "peak_memory_bytes",
    "mean_sm_util",
    "user",
    "command",
    "mean_sm_active_percent",
    "mean_tensor_active_percent",
)


def report_to_json(query: ReportQuery, rows: list[ReportRow]) -> dict[str, object]:
    """``gputop report --json``, and the lab agent's answer to a history request."""
    return {
        "schema": JSON_SCHEMA,
        "since": iso_text(query.since),
        "until": iso_text(query.until),
        "by": query.by.value,
        "idle_min_seconds": query.idle_min_s,
        "rows": [_row_json(row) for row in rows],
    }


def _row_json(row: ReportRow) -> dict[str, object]:
    document = {name: getattr(row, name) for name in ROW_FIELDS}
    if row.start_time is not None:
        document["start_time"] = row.start_time
    return document


def iso_text(epoch: float) -> str:
    """A time as ``report --json`` writes it: local, to the second, with its offset."""
    return dt.datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")
