"""Every GPUTOP_* number given absurd values (400 digits, ``1e400``, ``nan``, ``inf``, Arabic-Indic
digits, 120,000 characters: about the most one environment variable holds): each is refused by
its name in a message of a line or two, never the value back whole (a 120 KB message), or read
as documented (``-0`` is 0)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gputop.core import settings
from gputop.core.errors import UsageError

LONG = "7" * 120_000
ABSURD = ["9" * 400, "1e400", "nan", "inf", "-inf", "١٢", LONG, "1" + "0" * 5000]
CHECKED = [v for v in settings.ALL if isinstance(v, (settings.Seconds, settings.Count))]


@pytest.mark.parametrize("variable", CHECKED, ids=lambda v: v.name)
@pytest.mark.parametrize("value", ABSURD, ids=range(len(ABSURD)))
def test_an_absurd_number_is_refused_by_name_in_a_short_message(
    variable: settings.Seconds | settings.Count, value: str
) -> None:
    with pytest.raises(UsageError) as refused:
        variable.read({variable.name: value})
    message = str(refused.value)
    assert message.startswith(variable.name) or f" {variable.name}" in message
    assert len(message) < 400, message[:200]


@pytest.mark.parametrize("variable", CHECKED, ids=lambda v: v.name)
def test_minus_zero_is_zero_where_zero_is_allowed(
    variable: settings.Seconds | settings.Count,
) -> None:
    if variable.minimum > 0:
        with pytest.raises(UsageError):
            variable.read({variable.name: "-0"})
    elif isinstance(variable, settings.Seconds):
        assert variable.read({variable.name: "-0"}) == 0


def test_the_dashboards_snapshot_refuses_a_long_value_in_a_line() -> None:
    environ = {**os.environ, settings.FAKE_TIME.name: LONG}
    done = subprocess.run(
        [sys.executable, "-m", "gputop", "snapshot", "--fake", "demo"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("gputop: GPUTOP_FAKE_TIME=") and len(done.stderr) < 400


def test_ssh_options_that_cannot_be_split_are_refused_in_a_short_message() -> None:
    from gputop.core.remote.transport import ssh_argv

    for value in ("'", '"' + LONG):
        with pytest.raises(UsageError) as refused:
            ssh_argv("gpu1", "true", {settings.SSH_OPTIONS.name: value})
        message = str(refused.value)
        assert message.startswith(settings.SSH_OPTIONS.name) and len(message) < 400


@pytest.mark.parametrize("value", ["s" * 120_000, "/tmp/" + "d/" * 60_000], ids=["name", "path"])
def test_a_scenario_of_120000_characters_is_refused_in_a_short_message(value: str) -> None:
    from gputop.core.errors import ScenarioError
    from gputop.core.fake import resolve_scenario_path

    with pytest.raises(ScenarioError) as refused:
        resolve_scenario_path(value)  # GPUTOP_FAKE's, or --fake's
    assert str(refused.value).startswith("Bad scenario '") and len(str(refused.value)) < 400
