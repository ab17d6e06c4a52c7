"""``GPUTOP_CLAIMS_DIR`` naming a directory that does not exist, with a space or an escape in
it (found by attacking it): ``gputop claims`` printed it raw (an ESC sequence reached the
terminal), and the line it gives an administrator to copy, ``sudo install -d -m 1777 ...
PATH``, split such a path in two: ``/srv/gpu claims`` made ``/srv/gpu`` and ``claims``
world-writable directories. The path is now quoted for a shell and cleaned, in ``claims``
and in ``claim``'s error alike."""

from __future__ import annotations

import shlex

import pytest

from gputop.cli.main import main

SPACED = "/nonexistent/gpu claims"
ESCAPED = "/nonexistent/claims\x1b]0;title\x07"


@pytest.mark.parametrize("argv", [["claims"], ["claim", "--gpus", "0", "--for", "1m"]])
def test_the_line_to_copy_names_one_directory_and_no_escape_reaches_the_terminal(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", "demo")
    for path in (SPACED, ESCAPED):
        monkeypatch.setenv("GPUTOP_CLAIMS_DIR", path)
        main(argv)
        said = "".join(capsys.readouterr())
        assert "\x1b" not in said and "\x07" not in said
        line = said.split("install -d -m 1777 -o root -g root ", 1)[1].rstrip().rstrip(")")
        assert len(shlex.split(line)) == 1  # one directory, as given
    assert shlex.split(line)[0] == "/nonexistent/claims\\e]0;title\\x07"
