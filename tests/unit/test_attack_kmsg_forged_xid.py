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
