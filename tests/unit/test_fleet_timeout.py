"""``--timeout`` of the fleet: one default for the dashboard (``gputop --prometheus``),
``snapshot --prometheus`` and ``pick --prometheus``, and a value given is the one every one
of them reads with (the deadline itself: tests/real/test_fleet_prometheus.py)."""

from __future__ import annotations

import pytest

from gputop.cli import dashboard
from gputop.cli.fleet_cli import fleet_timeout
from gputop.cli.main import _parse
from gputop.core.errors import UsageError
from gputop.core.fleet import TIMEOUT_S

URL = "http://prometheus:9090"
COMMANDS = ([], ["snapshot"], ["pick", "-n", "1"])


def test_one_default_for_the_dashboard_snapshot_and_pick() -> None:
    assert [fleet_timeout(_parse([*c, "--prometheus", URL])) for c in COMMANDS] == [TIMEOUT_S] * 3


def test_a_timeout_given_is_the_one_each_reads_with() -> None:
    given = [fleet_timeout(_parse([*c, "--prometheus", URL, "--timeout", "2.5"])) for c in COMMANDS]
    assert given == [2.5] * 3


def test_the_dashboards_timeout_goes_with_prometheus() -> None:
    with pytest.raises(UsageError, match="--timeout goes with --prometheus"):
        dashboard.run(_parse(["--timeout", "3"]))
