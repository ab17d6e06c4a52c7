"""``gputop run --hosts``: the chosen host's answer to its launch is a host's (anyone who
controls that one machine, which may say its cards are free to be chosen). It was held
whole, with no time limit: a host whose answer never ended held ``run --hosts`` for ever,
growing. It is now read as the lab's remote actions are: at most ``ACTION_TIMEOUT_S``, the
first ``MAX_ANSWER_BYTES`` of each stream kept, and the host said not to have answered."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.hostile_hosts import agent_lines, good_document

from gputop.cli.main import main
from gputop.core.remote import remote_jobs

ENDLESS = "while :; do printf 'spam \\033]0;pwn\\007 %0500d\\n' 0; done"


@pytest.fixture
def endless_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``ssh`` on PATH: the agent's lines for ``gputop agent`` (cards free, held open),
    an answer without end for anything else (the launch); its pids in ``pids``."""
    document = good_document("v100x4")
    document["timestamp"] = time.time()
    for gpu in document["gpus"]:
        gpu["processes"] = []
        gpu["memory_used_bytes"] = 0
        gpu["utilization_percent"] = 0
    (tmp_path / "agent").write_text("".join(agent_lines(document)))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    ssh.write_text(
        "#!/bin/sh\n"
        f"echo $$ >> {tmp_path / 'pids'}\n"
        'case "$*" in\n'
        f"  *agent*) cat {tmp_path / 'agent'}; exec sleep 60;;\n"
        f"  *) {ENDLESS};;\n"
        "esac\n"
    )
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(remote_jobs, "ACTION_TIMEOUT_S", 2.0)
    try:
        yield tmp_path
    finally:
        for pid in (tmp_path / "pids").read_text().split():  # the shells, each ssh
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def test_a_launch_answer_without_end_is_cut_off_and_said(
    endless_host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    codes: list[int] = []
    runner = threading.Thread(
        target=lambda: codes.append(
            main(["run", "--hosts", "gpu1", "--auto", "1", "--timeout", "10", "--", "true"])
        ),
        daemon=True,
    )
    runner.start()
    runner.join(30)

    # before: still reading the answer, for ever
    assert not runner.is_alive()
    said = capsys.readouterr()
    assert codes == [1]
    assert "gpu1 did not answer within 2 s; the job may have started there" in said.err
    assert len(said.out) <= remote_jobs.MAX_ANSWER_BYTES * 2
    assert "\x1b" not in said.out
