"""A host that costs the lab more than any gputop agent would: one that hangs up as soon as it
has sent a snapshot (reconnected at once, it was an ssh a few milliseconds, for ever), and one
that sends lines faster than any agent does (read for ever, most of a core). Each is dropped or
retried with a backoff that grows up to its bound, and said in the host's status. And
snapshots that list more than any machine holds (100,000 cards, processes, MIG devices,
arguments): bounded where decoded."""

from __future__ import annotations

import io
from collections import deque
from pathlib import Path
from typing import Any

from helpers.hostile_hosts import agent_lines, good_document, raw_line, replay

from gputop.core.remote import host_link, protocol, remote_jobs
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


def _snapshot_line(document: dict[str, Any]) -> str:
    return agent_lines(document)[1]


def test_a_snapshot_of_more_gpus_than_a_machine_holds_is_an_unreadable_line() -> None:
    document = good_document()
    document["gpus"] = [dict(document["gpus"][0], index=i % 8) for i in range(2_000)]

    # before: read whole (100,000 cards: 2.7 s a line) and shown as that many cards
    status = replay("gpu1", [_snapshot_line(document)])

    assert status.snapshot is None and status.unreadable_lines == 1
    assert "more than any machine holds" in (status.unreadable_reason or "")


def test_a_snapshot_of_100000_processes_keeps_a_bounded_number_and_counts_the_rest() -> None:
    document = good_document()
    first, second = document["gpus"][0], document["gpus"][1]
    model = dict(first["processes"][0] if first["processes"] else {"type": "C"})
    model["command"] = ["python"]
    first["processes"] = [dict(model, pid=pid) for pid in range(1, 100_001)]
    first["processes"][0]["command"] = ["python", "x" * 100_000] + ["-v"] * 100_000
    second["processes"] = [dict(model, pid=7)]

    status = replay("gpu1", [_snapshot_line(document)])

    assert status.snapshot is not None
    gpus = {gpu.physical_index: gpu for gpu in status.snapshot.gpus}
    kept = gpus[first["index"]]
    assert len(kept.processes) == protocol.MAX_PROCESSES  # before: all 100,000
    assert kept.processes_dropped == 100_000 - protocol.MAX_PROCESSES
    assert gpus[second["index"]].processes == ()  # no room left: counted too
    assert gpus[second["index"]].processes_dropped == 1
    command = kept.processes[0].command
    assert len(command) == protocol.MAX_ARGS
    assert max(len(arg) for arg in command) == protocol.MAX_ARG_CHARS


def test_mig_devices_beyond_any_card_are_left_out() -> None:
    document = good_document()
    document["gpus"][0]["mig_devices"] = [{}] * 100_000

    status = replay("gpu1", [_snapshot_line(document)])

    assert status.snapshot is not None
    assert len(status.snapshot.gpus[0].mig_devices) == protocol.MAX_MIG_DEVICES


def test_a_hosts_stderr_without_an_end_of_line_is_kept_to_a_bounded_tail() -> None:
    tail: deque[str] = deque(maxlen=host_link.STDERR_TAIL_LINES)
    flood = b"\0" * (64 * 1024 * 1024) + b"\nPermission denied (publickey).\n"

    host_link.collect_tail(io.BytesIO(flood), tail)

    # before: the 64 MiB line whole (a host could send until the dashboard ran out of memory)
    assert max(len(line) for line in tail) <= host_link.STDERR_LINE_BYTES + 1
    assert tail[-1] == "Permission denied (publickey)."


def test_a_remote_actions_answer_is_kept_to_a_bounded_size(tmp_path: Path) -> None:
    """A host answering t, K or a launch with endless output: what is kept is bounded."""
    environ = _fake_ssh(
        tmp_path, "head -c 100000000 /dev/zero | tr '\\\\0' x\necho 'done' >&2\nexit 0"
    )

    result = remote_jobs.run_remote(["ssh", "gpu1", "true"], environ)

    # before: all 100 MB held (a host could send until the dashboard ran out of memory)
    assert result.ok
    assert len(result.stdout) <= remote_jobs.MAX_ANSWER_BYTES
    assert result.message.endswith("done")
    assert all(len(line) <= remote_jobs.MAX_SAID_CHARS for line in result.message.splitlines())


def test_a_remote_log_line_without_an_end_comes_in_bounded_pieces() -> None:
    from gputop.tui.lab import remote_screens

    size = 8 * remote_screens.MAX_LOG_LINE_BYTES
    stream = io.BytesIO(b"x" * size + b"\nlast\n")

    lines = list(remote_screens.log_lines(stream))

    # before: one line of them all, held whole (a host could send one without end)
    assert max(len(line) for line in lines) <= remote_screens.MAX_LOG_LINE_BYTES
    assert "".join(lines[:-1]) == "x" * size and lines[-1] == "last"


def test_a_hosts_texts_are_cut_where_decoded() -> None:
    """Kept whole, a megabyte's host name or user was measured and drawn on every frame."""
    long = "n" * 1_000_000
    document = good_document()
    document["host"] = long
    document["gpus"][0]["name"] = long
    lines = agent_lines(document, user=long)

    status = replay("gpu1", lines)

    assert status.snapshot is not None
    assert len(status.snapshot.host) == protocol.MAX_TEXT_CHARS
    assert len(status.snapshot.gpus[0].name or "") == protocol.MAX_TEXT_CHARS
    assert status.user is not None and len(status.user) == protocol.MAX_TEXT_CHARS


def test_an_agents_error_texts_are_cut_where_decoded() -> None:
    """Kept whole, an error line of megabytes became the host's failure (said in a toast of
    the lab's dashboard, and in its status on every frame), cleaned for seconds; and its jobs'
    error in every 'gputop lab --json' frame."""
    long = "\x1b[2J" * 1_000_000
    failed = replay("gpu1", [raw_line("error", message=long)])
    listed = replay("gpu1", [*agent_lines(good_document())[:2], raw_line("jobs", error=long)])

    assert failed.failure is not None
    assert len(failed.failure.reason) < 3 * protocol.MAX_TEXT_CHARS
    assert len(failed.describe()) < 3 * protocol.MAX_TEXT_CHARS
    assert listed.jobs_error is not None and len(listed.jobs_error) == protocol.MAX_TEXT_CHARS


def test_a_reduced_frame_that_never_ends_holds_a_bounded_number_of_lines() -> None:
    """nvidia-smi's frames (reduced mode): a host that sends app lines and never ``@end``
    (or a frame of a million) kept every one, growing for as long as it sent them."""
    from gputop.core.remote.reduced import ReducedFrames

    uuid = "GPU-aaaa0000-1111-2222-3333-444444444444"
    gpu = (
        f"0, {uuid}, 00000000:07:00.0, 81920, 1024.5, 80895, 3, [N/A], 35, 30, 71.25, 700.00, "
        "1980, 1980, 2619, 1980, 1980, 2619, P0, 550.54.15, NVIDIA H100 80GB HBM3"
    )
    frames = ReducedFrames("gpu9", clock=lambda: 1000.0)
    for line in ["@gpus", *[gpu] * 10_000, "@apps"]:
        frames.feed(line + "\n")
    for pid in range(1, 50_001):
        frames.feed(f"{uuid}, {pid}, 512, python\n")

    snapshot = frames.feed("@end\n")

    assert snapshot is not None
    assert len(snapshot.gpus) <= protocol.MAX_GPUS
    assert sum(len(g.processes) for g in snapshot.gpus) <= protocol.MAX_PROCESSES
    assert frames.skipped_lines >= 10_000 - protocol.MAX_GPUS + 50_000 - protocol.MAX_PROCESSES
