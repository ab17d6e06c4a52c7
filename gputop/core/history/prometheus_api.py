"""A Prometheus server's HTTP API, read for ``gputop report --prometheus`` (docs/exporter.md).

Only ``/api/v1/query_range``, with ``urllib`` (no new dependency). Everything that comes
back is outside data: the document must have the shape the API documents, every number
is checked where it enters (finite, not negative, at most 1e300: else that point is
unknown) and label values stay raw here, to be cleaned where they are shown.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from gputop.core.errors import GputopError, UsageError
from gputop.core.numbers import within

TIMEOUT_S = 60.0
MAX_POINTS = 10_000
"""Points per series asked for; Prometheus refuses more than 11,000."""
MAX_RESPONSE_BYTES = 512 << 20


class PrometheusError(GputopError):
    """The Prometheus server could not be reached or did not answer as its API says."""


@dataclass(frozen=True, slots=True)
class Series:
    labels: dict[str, str]
    points: dict[float, float]
    """Evaluation time (seconds since the epoch) -> value, for the checked points only."""


def check_url(url: str) -> str:
    """``url`` without its trailing slash, or a ``UsageError`` naming what to give."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(
            f"--prometheus {url!r}: give the server's http:// or https:// address, e.g. "
            "http://127.0.0.1:9090."
        )
    return url.rstrip("/")


def query_range(url: str, promql: str, start: float, end: float, step_s: float) -> list[Series]:
    """Every series ``promql`` gives over ``[start, end]`` at ``step_s``."""
    params = urllib.parse.urlencode(
        {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
    )
    address = f"{check_url(url)}/api/v1/query_range?{params}"
    try:
        with urllib.request.urlopen(address, timeout=TIMEOUT_S) as response:
            body = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as error:
        body = error.read(MAX_RESPONSE_BYTES + 1)
        if not body:
            raise PrometheusError(f"Prometheus at {url} answered HTTP {error.code}.") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise PrometheusError(f"Cannot reach Prometheus at {url}: {reason}.") from None
    if len(body) > MAX_RESPONSE_BYTES:
        raise PrometheusError(f"Prometheus at {url} answered more than 512 MiB: shorten --since.")
    return _series(url, body)


def _series(url: str, body: bytes) -> list[Series]:
    try:
        document = json.loads(body)
    except ValueError:
        raise PrometheusError(
            f"{url} did not answer as Prometheus's API does (not JSON)."
        ) from None
    if not isinstance(document, dict):
        raise PrometheusError(f"{url} did not answer as Prometheus's API does.")
    if document.get("status") != "success":
        error = document.get("error")
        raise PrometheusError(f"Prometheus at {url} refused the query: {error}.")
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise PrometheusError(f"{url} did not answer a range query with a matrix.")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError(f"{url} did not answer a range query with a list of series.")
    return [series for item in result if (series := _one(item)) is not None]


def _one(item: object) -> Series | None:
    if not isinstance(item, dict):
        return None
    metric, values = item.get("metric"), item.get("values")
    if not isinstance(metric, dict) or not isinstance(values, list):
        return None
    labels = {str(k): v for k, v in metric.items() if isinstance(v, str)}
    points: dict[float, float] = {}
    for value in values:
        if not isinstance(value, list) or len(value) != 2:
            continue
        at, text = value
        try:
            number = float(text) if isinstance(text, str) else None
        except ValueError:
            number = None
        if within(at, 0, 1e300) and within(number, 0, 1e300):
            points[float(at)] = float(number)  # type: ignore[arg-type]
    return Series(labels, points)
