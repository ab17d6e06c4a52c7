"""A history store whose text is not UTF-8 in one place (a shared store is another user's
file: its owner may write anything into it): that text is read with replacement characters
and shown cleaned, and the report of everything else goes on. Before, SQLite's decoding of
that one value stopped the whole report ("Could not decode to UTF-8 column ...")."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers.history import record_stepped

from gputop.cli.main import main

WHOLE = ("--since", "2000-01-01", "--until", "2100-01-01")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("undecodable") / "history.sqlite3"
    record_stepped("faulty", path, samples=12)
    connection = sqlite3.connect(path)
    with connection:
        (users,) = connection.execute("SELECT count(*) FROM strings WHERE text = 'hana'").fetchone()
        assert users == 1
        # \xff\xfe is no UTF-8, \x1b[2J a terminal's clear
        connection.execute(
            "UPDATE strings SET text = CAST(x'fffe1b5b324a68616e61' AS TEXT) WHERE text = 'hana'"
        )
    connection.close()
    return path


@pytest.mark.parametrize(
    ("args", "other"),
    [((), "root"), (("--by", "process"), "Xorg"), (("--health",), "memory repair recorded")],
    ids=["users", "processes", "health"],
)
def test_one_undecodable_text_is_that_texts_fault_and_the_report_goes_on(
    store: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], other: str
) -> None:
    code = main(["report", "--db", str(store), *WHOLE, *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "decode" not in captured.err
    assert other in captured.out  # the rest of the store
    assert "\x1b" not in captured.out
    assert "\\e[2Jhana" in captured.out


def test_the_json_report_is_strict_and_has_the_text_with_replacement_characters(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--db", str(store), *WHOLE, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    users = {row["key"] for row in document["rows"]}
    assert "root" in users and "\ufffd\ufffd\x1b[2Jhana" in users
