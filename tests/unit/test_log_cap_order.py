"""A log cut past its cap: whoever sees it under its cap sees the mark (gputop/core/jobs/logs.py).

The cut moves the newest lines after the mark's place, writes the mark and truncates; a
reader polling the log's size (``gputop jobs log``, a test) may look at any moment, so the
mark must already be there when the file becomes short."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputop.core.jobs import logs
from gputop.core.jobs.logs import LogCap

CAP = 64 * 1024
MARK = b"bytes of output left out here"


def test_the_mark_is_in_the_log_before_the_log_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "logs"
    directory.mkdir(mode=0o700)
    log = directory / "1.log"
    log.write_bytes(b"".join(b"line %06d of the job's output\n" % i for i in range(10_000)))
    log.chmod(0o600)
    seen_at_cut: list[bytes] = []
    truncate = os.ftruncate

    def watched(fd: int, length: int) -> None:
        seen_at_cut.append(os.pread(fd, length, 0))  # what stays once it is cut
        truncate(fd, length)

    monkeypatch.setattr(logs.os, "ftruncate", watched)
    cap = LogCap(str(log), CAP, 0)
    try:
        assert cap.check() is not None  # cut, and said so
    finally:
        cap.close()
    assert len(seen_at_cut) == 1
    assert seen_at_cut[0].count(MARK) == 1  # already there when the file became short
    kept = log.read_bytes()
    assert len(kept) <= CAP and kept.count(MARK) == 1
    assert kept.startswith(b"line 000000") and kept.endswith(b"line 009999 of the job's output\n")
