"""The parsers of what a person types: any text is a value in range or a message, never an
internal error. Dates and durations (``--since``, ``--until``, ``--idle-min``), Prometheus
URLs (``--prometheus``) and job ids, by hypothesis. See docs/security.md, "Every input from
outside is a message".
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import urllib.parse
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gputop.cli.jobs_command import job_id
from gputop.cli.main import main
from gputop.core.errors import UsageError
from gputop.core.history.periods import (
    EARLIEST_S,
    LATEST_S,
    MAX_DURATION_S,
    parse_duration,
    parse_moment,
)
from gputop.core.numbers import MAX_ID, parse_id
from gputop.core.prometheus.client import check_url

NOW = 1_795_000_000.0
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

digits = st.text(st.sampled_from("0123456789"), min_size=1, max_size=30)
offsets = st.integers(-26 * 60, 26 * 60).map(
    lambda minutes: (
        f"{'+' if minutes >= 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    )
)
iso_dates = st.builds(
    lambda y, m, d, rest: f"{y:04d}-{m:02d}-{d:02d}{rest}",
    st.integers(0, 9999),
    st.integers(0, 13),
    st.integers(0, 32),
    st.one_of(
        st.just(""),
        st.builds(
            lambda sep, h, mi, s, off: f"{sep}{h:02d}:{mi:02d}:{s:02d}{off}",
            st.sampled_from("T "),
            st.integers(0, 24),
            st.integers(0, 60),
            st.integers(0, 60),
            st.one_of(st.just(""), st.just("Z"), offsets),
        ),
    ),
)
durations = st.builds(lambda n, unit: f"{n}{unit}", digits, st.sampled_from("smhdwxy"))
moments = st.one_of(st.text(), iso_dates, durations)


@SETTINGS
@given(text=st.one_of(st.text(), durations))
@example("999999999w")
@example("0s")
def test_a_duration_is_seconds_in_range_or_a_usage_error(text: str) -> None:
    try:
        value = parse_duration(text, "--idle-min")
    except UsageError as error:
        assert "--idle-min" in str(error)
        return
    assert 0 <= value <= MAX_DURATION_S


@SETTINGS
@given(text=moments)
@example("0001-01-01")
@example("9999-12-31T23:59:59-23:59")
@example("9999-12-31T23:59:59+23:59")
@example("1970-01-01T00:00:00+01:00")
@example("5000w")
def test_a_moment_is_a_time_gputop_can_show_or_a_usage_error(text: str) -> None:
    try:
        value = parse_moment(text, "--since", NOW)
    except UsageError as error:
        assert "--since" in str(error)
        return
    assert EARLIEST_S <= value <= LATEST_S


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(since=moments, until=st.one_of(st.none(), moments))
@example(since="0001-01-01", until=None)
@example(since="1d", until="9999-12-31T23:59:59-23:59")
def test_report_with_any_window_exits_with_a_message_never_an_internal_error(
    since: str, until: str | None
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        args = ["report", "--db", str(Path(directory) / "none.sqlite3"), "--since", since]
        args += [] if until is None else ["--until", until]
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(args)
            except SystemExit as exit_:  # argparse: a value that looks like an option
                code = int(exit_.code or 0)
    assert code in (1, 2), err.getvalue()  # 1: no store there; 2: the window is refused
    assert "internal error" not in err.getvalue()


urls = st.one_of(
    st.text(),
    st.builds(
        lambda scheme, host, port, path: f"{scheme}://{host}{port}{path}",
        st.sampled_from(["http", "https", "ftp", "file", "HTTP", ""]),
        st.one_of(st.text(max_size=20), st.just("[::1"), st.just("[::1]"), st.just("127.0.0.1")),
        st.one_of(
            st.just(""), st.text(max_size=8).map(lambda p: f":{p}"), digits.map(":{}".format)
        ),
        st.one_of(st.just(""), st.text(max_size=20)),
    ),
)


@SETTINGS
@given(url=urls)
@example("http://[::1")
@example("http://127.0.0.1:abc")
@example("http://127.0.0.1:99999999999999999999")
@example("http://h:0")
def test_a_prometheus_url_is_one_urllib_can_open_or_a_usage_error(url: str) -> None:
    try:
        checked = check_url(url)
    except UsageError as error:
        assert "--prometheus" in str(error)
        return
    parts = urllib.parse.urlsplit(checked)
    assert parts.scheme in ("http", "https") and parts.hostname
    assert parts.port is None or 1 <= parts.port <= 65535
    assert checked.isascii() and checked.isprintable() and " " not in checked


@SETTINGS
@given(
    text=st.one_of(st.text(), digits, digits.map(lambda d: "0" * 30 + d), digits.map("#{}".format))
)
@example("1000000000000000000")
@example("00000000000000000001")
@example("9223372036854775808")
@example("9" * 5000)
def test_a_job_id_is_a_number_sqlite_can_hold_or_a_message(text: str) -> None:
    try:
        value = job_id(text)
    except argparse.ArgumentTypeError as error:
        assert len(str(error)) < 300
        return
    assert 0 <= value <= MAX_ID
    assert value == int(text.strip().lstrip("#"))


@SETTINGS
@given(text=st.one_of(st.text(), digits))
def test_parse_id_agrees_with_the_value(text: str) -> None:
    found = parse_id(text)
    if text.isascii() and text.isdigit() and int(text) <= MAX_ID:
        assert found == int(text)
    else:
        assert found is None
