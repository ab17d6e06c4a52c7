"""gputop's environment variables: each defined once (gputop/core/settings.py), each in
docs/reference.md's table, read when asked (not at import), a bad value refused by name."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.core import settings
from gputop.core.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def test_every_variable_is_in_the_reference_table_with_its_default() -> None:
    text = (ROOT / "docs" / "reference.md").read_text()
    table = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    rows = {
        match[0]: match[2]
        for match in re.findall(r"^\| `(GPUTOP_\w+)` \| (.+?) \| (.+?) \|$", table, re.M)
    }
    assert rows == {setting.name: setting.shown_default for setting in settings.ALL}


def test_the_names_are_spelled_in_few_modules() -> None:
    """Issue 43's bound: today settings.py and jobs/notify.py (a notify command's variables)."""
    spelled = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "gputop").rglob("*.py")
        if "GPUTOP_" in path.read_text()
    )
    assert len(spelled) <= 6, spelled


def test_a_variable_set_after_import_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTOP_WAIT_POLL_S", "0.5")
    assert settings.WAIT_POLL.read() == 0.5
    monkeypatch.delenv("GPUTOP_WAIT_POLL_S")
    assert settings.WAIT_POLL.read() == 5.0
    assert settings.WAIT_POLL.read({"GPUTOP_WAIT_POLL_S": " 7 "}) == 7.0


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        (settings.WAIT_POLL, "nan", "GPUTOP_WAIT_POLL_S 'nan': give a number of seconds from"),
        (settings.FAKE_SPEED, "0.5", "GPUTOP_FAKE_SPEED='0.5' is not a speed"),
        (settings.FAKE_TIME, "-1", "GPUTOP_FAKE_TIME='-1' is not a time"),
        (settings.FAKE_TIME, "٣", "GPUTOP_FAKE_TIME='٣' is not a time"),
        (settings.HISTORY_MAX_WAL, "0", "GPUTOP_HISTORY_MAX_WAL_MB='0' is not a size"),
        (settings.HISTORY_MAX_WAL, "9" * 400, "from 1 to 65536"),
    ],
)
def test_a_bad_value_is_refused_by_name(setting: object, value: str, words: str) -> None:
    with pytest.raises(UsageError) as raised:
        setting.read({setting.name: value})  # type: ignore[attr-defined]
    assert words in str(raised.value)


def test_a_running_job_uses_the_default_for_a_bad_value() -> None:
    assert settings.USAGE_POLL.or_default({"GPUTOP_USAGE_POLL_S": "inf"}) == 5.0
    assert settings.LOG_MAX.or_default({"GPUTOP_LOG_MAX": "lots"}) == 1024**3
    assert settings.LOG_MAX.or_default({"GPUTOP_LOG_MAX": "2G"}) == 2 * 1024**3
    assert settings.LOG_FLOOR.or_default({"GPUTOP_LOG_FLOOR": "0"}) == 0


@pytest.mark.parametrize(("value", "on"), [("", True), ("0", False), (" OFF ", False), ("1", True)])
def test_a_flag_is_off_only_when_said(value: str, on: bool) -> None:
    assert settings.SCREEN_DIFF.on({"GPUTOP_SCREEN_DIFF": value}) is on


def test_a_bad_value_from_the_command_line_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gputop", "snapshot", "--fake", "demo"],
        env={"GPUTOP_FAKE_SPEED": "fast", "GPUTOP_STATE_DIR": str(tmp_path), "PATH": "/usr/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "GPUTOP_FAKE_SPEED='fast' is not a speed" in result.stderr
    assert "Traceback" not in result.stderr
