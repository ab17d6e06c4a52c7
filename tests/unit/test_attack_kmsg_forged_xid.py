"""Another user forging an Xid in the kernel log (found by attacking it): the kernel logs
messages that quote what any user gave it, and the reader took ``NVRM: Xid (PCI:...): N``
anywhere in a record. An unprivileged user's overlayfs mount in a user namespace, with a
lower directory named ``/x NVRM: Xid (PCI:0000:3b:00): 79 x``, logs ``overlayfs: failed to
resolve '/x NVRM: Xid (PCI:0000:3b:00): 79 x': -2``, a kernel record: card 3b was read as
fallen off the bus, critical, never free, the exporter and the fleet saying so. Only a record
that begins with the driver's words is an Xid now. The real kernel and a real second user:
tests/real/test_health_kmsg_forged.py."""

from __future__ import annotations

import pytest

from gputop.core.sampling.kmsg_xid import parse_record

XID = b"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus."


@pytest.mark.parametrize(
    "message",
    [
        b"overlayfs: failed to resolve '/x " + XID + b"': -2",
        b"process 'a' launched '/tmp/" + XID + b"' with NULL argv: empty string added",
        b'audit: type=1400 apparmor="DENIED" name="/tmp/' + XID + b'"',
        b" " + XID,
        b"x" + XID,
    ],
)
def test_an_xid_quoted_inside_another_message_is_none(message: bytes) -> None:
    assert parse_record(b"3,7,12500000,-;" + message + b"\n") is None


def test_the_drivers_own_record_is_still_read() -> None:
    assert parse_record(b"3,7,12500000,-;" + XID + b"\n") == ((0, 0x3B, 0), 79, 12.5)


@pytest.mark.parametrize("priority", [b"12", b"14", b"11", b"191", b"999"])
def test_a_record_a_process_wrote_is_none(priority: bytes) -> None:
    """A line written to /dev/kmsg (by root, or by journald forwarding any user's syslog
    message there: ``ForwardToKMsg=yes``, with ``logger -t 'NVRM: Xid (PCI:...): 79,'``) is
    given the user facility or another, never the kernel's (0): the kernel refuses it from
    userspace. The driver's own words in such a record are no Xid. Fails on the old code,
    which read the priority as nothing."""
    assert parse_record(priority + b",7,12500000,-;" + XID + b"\n") is None


@pytest.mark.parametrize("priority", [b"0", b"3", b"4", b"6", b"7"])
def test_a_kernel_record_of_any_level_is_read(priority: bytes) -> None:
    assert parse_record(priority + b",7,12500000,-;" + XID + b"\n") == ((0, 0x3B, 0), 79, 12.5)
