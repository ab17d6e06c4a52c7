"""A host that costs the lab more than any gputop agent would: one that hangs up as soon as it
has sent a snapshot (reconnected at once, it was an ssh a few milliseconds, for ever), and one
that sends lines faster than any agent does (read for ever, most of a core). Each is dropped or
retried with a backoff that grows up to its bound, and said in the host's status."""

from __future__ import annotations

from pathlib import Path

from helpers.hostile_hosts import agent_lines, good_document

from gputop.core.remote import host_link
from gputop.core.remote.host_link import HostLink
from gputop.core.remote.status import LinkState


def _fake_ssh(tmp_path: Path, body: str) -> dict[str, str]:
    """An ``ssh`` on PATH running ``body``; each start is counted in ``starts``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ssh"
    script.write_text(f"#!/bin/sh\necho x >> {tmp_path / 'starts'}\n{body}\n")
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def _starts(tmp_path: Path) -> int:
    path = tmp_path / "starts"
    return len(path.read_text().split()) if path.exists() else 0


def test_a_host_that_hangs_up_after_each_snapshot_is_retried_with_a_growing_backoff(
    tmp_path: Path,
) -> None:
    hello, snapshot, _ = agent_lines(good_document())
    (tmp_path / "out").write_text(hello + snapshot)
    environ = _fake_ssh(tmp_path, f"cat {tmp_path / 'out'}\nexit 0")
    link = HostLink("gpu1", environ=environ, first_retry_s=0.1, max_retry_s=0.4).start()
    try:
        # before: every next try was at once (a snapshot had come), so the wait never grew
        assert link.wait_for(
            lambda s: s.state is LinkState.UNREACHABLE and (s.retry_in_s or 0) > 0.3, 20
        ), link.status()
        status = link.status()
    finally:
        link.stop()

    assert status.snapshots_received >= 1
    assert status.retry_in_s is not None and status.retry_in_s <= 0.4  # bounded
    assert _starts(tmp_path) < 20  # 0.1, 0.2, 0.4 s: a handful, not hundreds


def test_a_host_that_floods_its_connection_is_dropped_said_and_backed_off(
    tmp_path: Path,
) -> None:
    hello, _, _ = agent_lines(good_document())
    unreadable = '{"type":"snapshot","snapshot":' + "[" * 40 + "\n"
    (tmp_path / "out").write_text(hello + unreadable * 2000)
    environ = _fake_ssh(tmp_path, f"while :; do cat {tmp_path / 'out'}; done")
    link = HostLink("gpu1", environ=environ, first_retry_s=5.0).start()
    try:
        # before: read for ever, most of a core, the host "connecting" all along
        assert link.wait_for(lambda s: s.state is LinkState.UNREACHABLE, 30), link.status()
        status = link.status()
    finally:
        link.stop()

    assert status.failure is not None and status.failure.kind == "flood"
    assert "more than a gputop agent sends" in status.describe()
    assert status.retry_in_s is not None and status.retry_in_s > 0
    assert status.bytes_received <= host_link.FLOOD_BYTES + host_link.MAX_LINE_BYTES
