"""Xids from the kernel log: the driver's ``NVRM: Xid (PCI:0000:3b:00): 79, ...`` records in
``/dev/kmsg`` (docs/health.md).

NVML's event set does not deliver every Xid (DCGM reads 79, 119 and 120 from the kernel log
for that reason), and it records none from before it was made; the kernel log has every
record since boot while its ring buffer holds them. It is readable by root, or by anyone
where ``kernel.dmesg_restrict`` is 0; where it is not, the reader says so once.

Each ``read`` of ``/dev/kmsg`` returns one record, ``PRIORITY,SEQUENCE,MICROSECONDS,FLAGS;
MESSAGE`` (Documentation/ABI/testing/dev-kmsg); the time is since boot. The text is another
program's: only the bus id and the code are taken from it, both range-checked, and nothing
of it is ever shown. Only a record that begins with the driver's words is one: the kernel
also logs messages that quote what any user gave it (an overlayfs mount a user made in a
user namespace: ``overlayfs: failed to resolve '<path>'``), and such a path that spelled an
Xid was read as one. Nor is a record a process wrote (root, or journald
forwarding any user's syslog message): the kernel never gives those its own facility
(``KERNEL_FACILITY``). A plain file of such records (for tests) is read the same way, and
followed as it grows.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import select
import threading
import time
from collections.abc import Callable

KMSG = "/dev/kmsg"
READ_SIZE = 8192
"""More than one record can hold (the kernel caps them at about 1 KiB of text)."""
WAIT_S = 5.0
"""How long the thread waits for the next record: how soon it sees that it is to stop (a
record ends the wait at once; each timeout is a wake-up, which costs CPU: docs/speed.md)."""
FILE_POLL_S = 0.5
"""A plain file given for the log (``settings.KERNEL_LOG``) at its end: looked at again this
often, since a file is always ready to read and its end says nothing of what comes next."""
DRAIN_AT_START = 100_000
"""At most this many records are read before the first sample (the ring buffer's worth)."""

BusKey = tuple[int, int, int]
"""(domain, bus, device) of a PCI address: what the kernel's and NVML's forms share."""

_RECORD = re.compile(rb"^(\d{1,3}),(\d{1,20}),(\d{1,20}),[^;]{0,16};(.*)$", re.DOTALL)
_XID = re.compile(
    rb"NVRM: Xid \(PCI:([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.[0-7])?\): "
    rb"(\d{1,10})\b"
)
MAX_XID = 2**32 - 1
KERNEL_FACILITY = 0
"""The facility of the kernel's own records (the priority's bits above its level). A line a
process writes to ``/dev/kmsg`` never has it: the kernel gives such a line the user facility
(or the one it asks for, never the kernel's). Root can write there, and so can journald for
any user's syslog message where it forwards them (``ForwardToKMsg=yes``): such a record that
spells the driver's words is no Xid."""


def bus_key(pci_bus_id: str | None) -> BusKey | None:
    """``00000000:3B:00.0`` (NVML) or ``0000:3b:00`` (the kernel's) as (domain, bus, device)."""
    if not pci_bus_id:
        return None
    match = re.fullmatch(
        r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.[0-7])?", pci_bus_id.strip()
    )
    if match is None:
        return None
    return (int(match[1], 16), int(match[2], 16), int(match[3], 16))


def parse_record(record: bytes) -> tuple[BusKey, int, float] | None:
    """(bus, Xid, seconds since boot) of one kernel log record that reports an Xid."""
    match = _RECORD.match(record.strip(b"\n"))
    if match is None or int(match[1]) >> 3 != KERNEL_FACILITY:
        return None
    xid = _XID.match(match[4])  # the driver's record begins so; others may quote the text
    if xid is None:
        return None
    code = int(xid[4])
    if not 0 < code <= MAX_XID:
        return None
    bus = (int(xid[1], 16), int(xid[2], 16), int(xid[3], 16))
    return bus, code, int(match[3]) / 1_000_000


def boot_epoch() -> float:
    """Epoch seconds of boot, as the kernel log's clock counts (CLOCK_MONOTONIC's zero)."""
    return time.time() - time.monotonic()


XidSink = Callable[[BusKey, int, float], None]
"""Told of each Xid record: its bus, its code and its epoch time."""


class KernelLogReader:
    """Reads the kernel log's Xid records on a thread of its own (``gputop-kmsg``)."""

    def __init__(self, sink: XidSink, path: str = KMSG) -> None:
        self._sink = sink
        self._path = path
        self._stop = threading.Event()
        self._fd: int | None = None
        self._pending = b""
        self._boot = boot_epoch()
        self.problem: str | None = None
        """Why the kernel log cannot be read (no permission), or ``None``."""

    def start(self) -> bool:
        """Open the log, read what it holds now, then follow it; False (``problem`` says
        why) when it cannot be opened."""
        try:
            self._fd = os.open(self._path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as error:
            self.problem = f"{self._path}: {os.strerror(error.errno or errno.EIO)}"
            return False
        for _ in range(DRAIN_AT_START):
            if not self._read_one():
                break
        threading.Thread(target=self._follow, name="gputop-kmsg", daemon=True).start()
        return True

    def close(self) -> None:
        self._stop.set()

    def _follow(self) -> None:
        try:
            while not self._stop.is_set():
                fd = self._fd
                if fd is None:
                    return
                ready, _, _ = select.select([fd], [], [], WAIT_S)
                if ready and not self._read_one():
                    self._stop.wait(FILE_POLL_S)  # a plain file at its end: look again later
        finally:
            fd, self._fd = self._fd, None
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _read_one(self) -> bool:
        """Read and hand on what one read gives; False when there is nothing yet."""
        fd = self._fd
        if fd is None:
            return False
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return False
        except OSError as error:
            # EPIPE: records were overwritten before they were read; go on from the next
            return error.errno == errno.EPIPE
        if not data:
            return False
        if not self._pending and data.endswith(b"\n") and b"NVRM: Xid" not in data:
            return True  # a whole record (or records) of something else: most of the log
        self._pending += data
        *records, self._pending = self._pending.split(b"\n")
        if len(self._pending) > READ_SIZE:  # no line end in sight: not a record
            self._pending = b""
        for record in records:
            if record.startswith(b" "):  # a record's continuation (its key=value lines)
                continue
            parsed = parse_record(record)
            if parsed is not None:
                bus, code, since_boot = parsed
                self._sink(bus, code, self._boot + since_boot)
        return True
