"""``gputop hosts install`` reads what a server sends back, and a server can be hostile (anyone
who controls that one machine). Its output was held whole for up to the 600 s allowed (200 MB
sent: 720 MB resident) and a "version" line of 20 MB was printed whole. What is kept of it is
now bounded: its marker lines and its last lines, each cut, and what is said of it short."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from helpers.peak_memory import run_with_peak

HOSTILE = r"""
import sys
sys.stdin.buffer.read()
out = sys.stdout.buffer
out.write(b"gputop-install: method pipx\n")
out.write(b"gputop-install: version " + b"x" * 300 + b"\x1b]0;pwn\x07" + b"y" * 20_000_000 + b"\n")
spam = b"spam " * 200 + b"\n"
for _ in range(200_000):
    out.write(spam)
out.write(b"z" * 30_000_000)
"""


def _install(tmp_path: Path, body: str) -> tuple[int, str, int]:
    """(exit status, what was printed, peak resident KiB of gputop and what it waited for)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "remote.py").write_text(body)
    ssh = bin_dir / "ssh"
    ssh.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'remote.py'}\n")
    ssh.chmod(0o755)
    wheel = tmp_path / "gputop_dash-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK" + b"\0" * 1000)
    environ = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    gputop = [sys.executable, "-m", "gputop", "hosts", "install", "--wheel", str(wheel), "gpu1"]
    with (tmp_path / "out").open("wb") as out, (tmp_path / "err").open("wb") as err:
        done, peak_kib = run_with_peak(gputop, stdout=out, stderr=err, env=environ)
    said = (tmp_path / "out").read_text() + (tmp_path / "err").read_text()
    return done.returncode, said, peak_kib


def test_a_host_sending_hundreds_of_megabytes_is_read_in_bounded_memory_and_said_short(
    tmp_path: Path,
) -> None:
    code, said, peak_kib = _install(tmp_path, HOSTILE)

    assert code == 0, said[-500:]
    assert "gpu1: ok: installed with pipx; gputop there: xxx" in said
    # before: 20,000,420 characters, the whole "version" line
    assert len(said) < 2000, len(said)
    assert "\x1b" not in said
    # before: 720 MB resident (every byte held until ssh ended)
    assert peak_kib < 200 * 1024, peak_kib
