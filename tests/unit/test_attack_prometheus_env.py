"""``--prometheus`` without a URL reads GPUTOP_PROMETHEUS: an absurd value there (400 digits,
``nan``, Arabic-Indic digits in the host, an escape, 120,000 characters) is refused naming the
variable, not an option the person never typed, in a message of a line or two; exit 2."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from gputop.cli.prometheus_args import fleet_server
from gputop.core import settings
from gputop.core.errors import UsageError

ABSURD = ["9" * 400, "nan", "http://١٢:9090", "http://x\x1b[2J", "http://" + "h" * 120_000, "/"]


def arguments(url: str | None) -> argparse.Namespace:
    return argparse.Namespace(
        prometheus=url, prometheus_auth_file=None, prometheus_ca=None, match=None, group_by=None
    )


@pytest.mark.parametrize("value", ABSURD, ids=range(len(ABSURD)))
def test_a_bad_url_in_the_variable_is_refused_by_its_name(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(settings.PROMETHEUS.name, value)
    with pytest.raises(UsageError) as refused:
        fleet_server(arguments(""))
    message = str(refused.value)
    assert message.startswith(f"{settings.PROMETHEUS.name}=") and len(message) < 400, message
    assert "\x1b" not in message


def test_the_option_is_named_where_the_url_was_given_with_it() -> None:
    with pytest.raises(UsageError, match=r"^--prometheus 'nan': give the server's"):
        fleet_server(arguments("nan"))


def test_gputop_snapshot_says_so_and_exits_2() -> None:
    environ = {**os.environ, settings.PROMETHEUS.name: "http://" + "h" * 120_000}
    done = subprocess.run(
        [sys.executable, "-m", "gputop", "snapshot", "--prometheus"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("gputop: GPUTOP_PROMETHEUS='http://") and len(done.stderr) < 400
