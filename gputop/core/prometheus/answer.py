"""One answer of Prometheus's API, decoded as it arrives within a budget (docs/security.md,
"A hostile Prometheus").

Never held whole: each series is kept as arrays of numbers, at most the points asked for,
so memory is bounded by the ``Budget``, not by what a server sends (one series of 15 M
points once took 1.7 GB). Another shape is "not an answer", never an internal error; each
value is checked where it enters, else unknown. A series larger than a megabyte (its labels:
a hostile exporter's, which Prometheus stores as they came) is passed over unread and
counted (``Budget.passed_over``), the others read. Label values stay raw, cleaned where
shown.
"""

from __future__ import annotations

import json
import math
import shlex
import threading
import time
from array import array
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import TypeVar

from gputop.core.errors import GputopError
from gputop.core.numbers import within
from gputop.core.prometheus.stream import (
    SKIPPED,
    Stream,
    TooLarge,
    instant_items,
    points,
    walk_array,
    walk_object,
)
from gputop.core.records import frozen, mutable

TIMEOUT_S = 60.0
"""The default ``--timeout`` of a report: the most seconds the whole of it may take."""
MAX_TOTAL_BYTES = 128 << 20
"""What all the answers of one report or refresh may hold together, read as they arrive."""
MAX_SERIES = 200_000
"""Series (or instant samples) in all the answers of one report or refresh."""
MAX_TARGET_SERIES = 20_000
"""Series of one target (its ``job`` and ``instance``) in one answer: past it, that target is
left out of the whole report or refresh (``Budget.flooded``) and the others are read. A node
of 16 cards in MIG mode sends some 3,400 series in the cards' answer, one of 2,000 processes
4,000 in the processes'; an exporter of 100,000 cards is a flood, and alone it took the
whole bound (``MAX_SERIES``), so no node was shown."""
MAX_MESSAGE_CHARS = 200
_LARGEST = 1e300
_TIME_SLACK_S = 0.001
"""The window is sent with three decimals: a point at its very edge may differ by that."""


class PrometheusError(GputopError):
    """The Prometheus server could not be reached or did not answer as its API says."""


@frozen
class Series:
    labels: dict[str, str]
    times: array[float]
    """Evaluation times (seconds since the epoch) of the points inside the window."""
    values: array[float]
    """Their values; NaN where the value was out of range (unknown, the point present)."""

    @property
    def points(self) -> dict[float, float | None]:
        """Time -> value, ``None`` where unknown."""
        return {
            at: None if math.isnan(value) else value
            for at, value in zip(self.times, self.values, strict=True)
        }


@frozen
class Sample:
    """One series of an instant query's answer."""

    labels: dict[str, str]
    time: float | None
    """When Prometheus evaluated it (seconds since the epoch), None if no valid time."""
    value: float | None
    """None where unknown: not a number, infinite, negative or above the figure's maximum."""


_Labelled = TypeVar("_Labelled", Sample, Series)


@mutable
class Budget:
    """What one report or refresh may spend on the server: seconds (a deadline) and bytes."""

    timeout_s: float = TIMEOUT_S
    max_bytes: int = 0
    """0: ``MAX_TOTAL_BYTES``."""
    what: str = "report"
    """What the budget is for, as messages name it ("report", "refresh")."""
    advice: str = "shorten --since, or ask --by user or gpu"
    deadline: float = field(init=False)
    bytes_read: int = field(default=0, init=False)
    series: int = field(default=0, init=False)
    queries: int = field(default=0, init=False)
    passed_over: int = field(default=0, init=False)
    """Series passed over, each larger than a megabyte (``MAX_VALUE_CHARS``)."""
    flooded: dict[tuple[str, str], int] = field(default_factory=dict, init=False)
    """Targets (job, instance) that sent more than ``MAX_TARGET_SERIES`` series in one
    answer, and how many they had sent then. Every series of theirs is left out of every
    answer (``without_flooded``) and no longer counted in ``series``; the others read."""
    answers: list[Answer] = field(default_factory=list, init=False, repr=False)
    """The answers read with this budget: what each holds of a target that floods."""

    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.timeout_s
        self.max_bytes = self.max_bytes or MAX_TOTAL_BYTES

    def spend(
        self, read: int = 0, series: int = 0, queries: int = 0, passed_over: int = 0
    ) -> Budget:
        """Count what one request spent (requests of one budget may run at once)."""
        with self._lock:
            self.bytes_read += read
            self.series += series
            self.queries += queries
            self.passed_over += passed_over
        return self

    def flood(self, target: tuple[str, str], series: int) -> None:
        """``target`` sent ``series`` series in one answer, past ``MAX_TARGET_SERIES``: what
        every answer counted of it is given back (they leave it out), so one hostile target
        costs the others nothing of the bound, however many answers it fills."""
        with self._lock:
            if target in self.flooded:
                return
            self.flooded[target] = series
            self.series -= sum(answer.by_target.get(target, 0) for answer in self.answers)

    def without_flooded(self, found: list[_Labelled]) -> list[_Labelled]:
        """``found`` (samples or series) less those of a target that flooded any answer of
        this budget (its series in an answer read before the flood was seen, too)."""
        flooded = self.flooded
        if not flooded:
            return found
        return [one for one in found if target_of(one.labels) not in flooded]

    def seconds_left(self) -> float:
        return self.deadline - time.monotonic()


def target_of(labels: Mapping[str, object]) -> tuple[str, str] | None:
    """The target (job, instance) a series came from, where both labels are text."""
    job, instance = labels.get("job"), labels.get("instance")
    if type(job) is str and type(instance) is str:
        return job, instance
    return None


def one_line(text: str) -> str:
    """``text`` as one line of at most ``MAX_MESSAGE_CHARS`` characters, for a message."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_MESSAGE_CHARS else line[: MAX_MESSAGE_CHARS - 1] + "…"


class ReadFailed(Exception):
    """Reading the answer failed (not its content): the original error is its cause."""


def too_slow(url: str, budget: Budget) -> PrometheusError:
    if budget.what == "report":
        hint = "give a longer --timeout, or a shorter --since"
    else:
        hint = "give a longer --timeout"
    return PrometheusError(
        f"Prometheus at {url} did not answer within --timeout {budget.timeout_s:g} s (for the "
        f"whole {budget.what}): {hint}."
    )


class Answer:
    """One answer, walked as it arrives: only the envelope's few small values and one
    series (its labels, then its points one batch at a time) are ever Python objects; each
    series is kept compact at once. What the envelope said is checked at the end."""

    def __init__(
        self,
        url: str,
        budget: Budget,
        result_type: str,
        maximum: float,
        window: tuple[float, float] | None,
        most_points: int,
    ) -> None:
        self.url = url
        self.budget = budget
        self.wanted_type = result_type
        self.maximum = min(maximum, _LARGEST)  # an infinite value is never one
        self.window = (
            (window[0] - _TIME_SLACK_S, window[1] + _TIME_SLACK_S) if window is not None else None
        )
        self.most_points = most_points
        self.stream: Stream | None = None
        self.status: object = None
        self.error: object = None
        self.result_type: object = None
        self.series: list[Series] | None = None
        self.samples: list[Sample] | None = None
        self.items = 0
        self.by_target: dict[tuple[str, str], int] = {}
        """Series of each target kept in this answer (``MAX_TARGET_SERIES``)."""
        with budget._lock:
            budget.answers.append(self)

    # The envelope: {"status": ..., "data": {"resultType": ..., "result": [...]}, ...}
    def top(self, key: str) -> None:
        stream = self._stream()
        if key == "data" and stream.peek() == "{":
            walk_object(stream, self.data)
            return
        value = stream.value()
        if key == "status":
            self.status = value
        elif key == "error":
            self.error = value

    def data(self, key: str) -> None:
        stream = self._stream()
        if key == "result" and stream.peek() == "[":
            self.series, self.samples = [], []
            if self.wanted_type == "vector":
                instant_items(stream, self.instants, self.pass_over)
            else:
                walk_array(stream, self.item)
            return
        value = stream.value()
        if key == "resultType":
            self.result_type = value
        elif key == "result":
            self.series = self.samples = None  # not a list: said below

    def item(self) -> None:
        stream = self._stream()
        self.items += 1
        if self.items % 1024 == 0 and self.budget.seconds_left() <= 0:
            raise too_slow(self.url, self.budget)  # the deadline holds while reading, too
        if stream.peek() != "{":
            stream.value()  # not a series: skipped
            return
        found = _Item(self)
        walk_object(stream, found.member)
        found.keep()

    def instants(self, items: list[object]) -> None:
        """A run of an instant vector's items, decoded whole (each is small), checked in one
        pass: labels that are strings, a time that is one, a value as ``point_value`` says."""
        if self.budget.seconds_left() <= 0:
            raise too_slow(self.url, self.budget)  # the deadline holds while reading, too
        samples = self.samples
        if samples is None:
            return
        maximum = self.maximum
        kept = 0
        for item in items:
            if type(item) is not dict:
                continue  # not a series: skipped
            metric = item.get("metric")
            pair = item.get("value")
            if type(metric) is not dict or type(pair) is not list or len(pair) != 2:
                continue
            for label in metric.values():
                if type(label) is not str:  # keys are strings in JSON; values need not be
                    metric = {k: v for k, v in metric.items() if type(v) is str}
                    break
            at, text = pair
            kind = type(at)
            evaluated = float(at) if (kind is float or kind is int) and 0 <= at <= 1e11 else None
            number = None
            if type(text) is str and len(text) <= 400:
                try:
                    number = float(text)
                except ValueError:
                    number = None
                else:
                    if not 0.0 <= number <= maximum:  # NaN, infinite, negative or too large
                        number = None
            if self.flooding(metric):
                continue
            samples.append(Sample(metric, evaluated, number))
            kept += 1
        self.count(kept, items)

    def flooding(self, labels: Mapping[str, object]) -> bool:
        """Whether the series of ``labels`` is one of a target past ``MAX_TARGET_SERIES``
        in this answer: then it is left out (``left_out``)."""
        target = target_of(labels)
        if target is None:
            return False
        if target in self.budget.flooded:  # without the lock: a target is only ever added
            return True  # left out already: neither kept nor counted
        by_target = self.by_target
        sent = by_target.get(target, 0) + 1
        if sent <= MAX_TARGET_SERIES:
            by_target[target] = sent
            return False
        self.left_out(target, sent)
        return True

    def left_out(self, target: tuple[str, str], sent: int) -> None:
        """``target`` past ``MAX_TARGET_SERIES`` with its ``sent``-th series: its series
        read before are dropped (a flood's first ones are not held to the end of the read
        either) and the budget told, which gives back what every answer counted of it."""
        if self.samples:
            self.samples[:] = [s for s in self.samples if target_of(s.labels) != target]
        if self.series:
            self.series[:] = [s for s in self.series if target_of(s.labels) != target]
        self.budget.flood(target, sent)

    def _stream(self) -> Stream:
        assert self.stream is not None
        return self.stream

    def count_one(self) -> None:
        self.count(1)

    def pass_over(self) -> None:
        """One series too large to read, left out (its labels of more than a megabyte)."""
        self.budget.spend(passed_over=1)

    def count(self, series: int, items: list[object] | None = None) -> None:
        """``series`` more read; past ``MAX_SERIES`` in all, refused, naming the target most
        of ``items`` (the instant vector's run that passed the bound) came from."""
        if self.budget.spend(series=series).series > MAX_SERIES:
            raise PrometheusError(
                f"Prometheus at {self.url} answered more than {MAX_SERIES:,} series in all for "
                f"this {self.budget.what}: {self.budget.advice}{_most_from(items or [])}."
            )

    def _checked(self) -> None:
        if self.status != "success":
            text = one_line(self.error) if isinstance(self.error, str) else "no reason given"
            raise PrometheusError(f"Prometheus at {self.url} refused the query: {text}.")
        kind = (
            "a range query with a matrix"
            if self.wanted_type == "matrix"
            else ("a query with an instant vector")
        )
        if self.result_type != self.wanted_type:
            raise PrometheusError(f"{self.url} did not answer {kind}.")
        if self.series is None or self.samples is None:
            raise PrometheusError(f"{self.url} did not answer {kind} of series.")

    def checked_series(self) -> list[Series]:
        self._checked()
        assert self.series is not None
        return self.series

    def checked_samples(self) -> list[Sample]:
        self._checked()
        assert self.samples is not None
        return self.samples


class _Item:
    """One item of a matrix's ``data.result``: ``metric`` and ``values``."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.labels: dict[str, str] | None = None
        self.times: array[float] = array("d")
        self.values: array[float] = array("d")
        self.has_values = False
        self.too_large = False

    def member(self, key: str) -> None:
        answer = self.answer
        stream = answer._stream()
        if key == "values" and stream.peek() == "[":
            self.has_values = True
            points(stream, self.point)
            return
        value = stream.value_or_skip()
        if value is SKIPPED:
            self.too_large = self.too_large or key == "metric"
        elif key == "metric" and isinstance(value, dict):
            self.labels = {str(k): v for k, v in value.items() if isinstance(v, str)}

    def point(self, point: object) -> None:
        if not isinstance(point, list) or len(point) != 2:
            return
        at, text = point
        window = self.answer.window
        if window is None or not within(at, window[0], window[1]):
            return  # outside the window asked for: not counted
        if len(self.times) >= self.answer.most_points:
            return  # more points than the step asks for: they add nothing, and are not kept
        number = point_value(text, self.answer.maximum)
        self.times.append(float(at))
        self.values.append(math.nan if number is None else number)

    def keep(self) -> None:
        answer = self.answer
        if self.too_large:
            answer.pass_over()
            return
        if self.labels is None or not self.has_values or answer.series is None:
            return
        if answer.flooding(self.labels):
            return
        answer.count_one()
        answer.series.append(Series(self.labels, self.times, self.values))


MAX_NAMED_CHARS = 80
"""The longest instance a refusal names (a longer one is said without it)."""


def _most_from(items: list[object]) -> str:
    """``; most came from instance 'X' (job 'Y'), which --match '{instance!="X"}' leaves
    out`` where one target sent most of ``items`` (a flood of one exporter, say), else ""."""
    targets = Counter(
        (metric.get("job"), metric.get("instance"))
        for item in items
        if type(item) is dict and type(metric := item.get("metric")) is dict
    )
    if not targets:
        return ""
    (job, instance), most = targets.most_common(1)[0]
    if most * 2 <= len(items) or type(instance) is not str or type(job) is not str:
        return ""
    if len(instance) > MAX_NAMED_CHARS or len(job) > MAX_NAMED_CHARS:
        return "; most came from one target"
    matcher = shlex.quote(
        "{instance!=" + json.dumps(instance, ensure_ascii=False, allow_nan=False) + "}"
    )
    return (
        f"; most came from instance {instance!r} (job {job!r}), which --match {matcher} leaves out"
    )


def walk(url: str, read: Callable[[], bytes], answer: Answer) -> None:
    """The answer read into ``answer``, the document walked by hand down to ``data.result``
    and each series' points decoded in batches as they arrive."""
    stream = Stream(read)
    answer.stream = stream
    listed = False  # JSON, but a list where the answer's object belongs
    try:
        listed = stream.peek() == "["
        walk_object(stream, answer.top)
        stream.end()
    except ReadFailed as failed:
        cause = failed.__cause__
        reason = str(cause) or type(cause).__name__
        raise PrometheusError(
            f"Cannot read Prometheus's answer at {url}: {one_line(reason)}."
        ) from None
    except TooLarge:
        raise PrometheusError(
            f"{url} did not answer as Prometheus's API does (a value of more than a megabyte)."
        ) from None
    except RecursionError:
        raise PrometheusError(
            f"{url} did not answer as Prometheus's API does (JSON nested too deeply)."
        ) from None
    except (ValueError, IndexError, TypeError, OverflowError):  # not JSON, not UTF-8, ...
        what = "a JSON list, not an object" if listed else "not JSON"
        raise PrometheusError(f"{url} did not answer as Prometheus's API does ({what}).") from None


def point_value(text: object, maximum: float) -> float | None:
    """A sample's value (the API writes it as a string): finite, 0 to ``maximum``."""
    if not isinstance(text, str) or len(text) > 400:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if within(number, 0, maximum) else None
