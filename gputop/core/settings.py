"""gputop's environment variables, each named, typed, bounded and defaulted once.

A variable is read when its value is needed, never cached at import: tests set one after
import, and a job's supervisor reads the environment the job was launched with (``environ``).
Every one is listed in docs/reference.md ("Environment variables"; a test holds the table to
``ALL``). A bad number is refused by name with its range (numbers.py), never a traceback;
where a job already runs, the default is used instead (``or_default``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from gputop.core.errors import UsageError
from gputop.core.numbers import is_ascii_digits, parse_seconds, parse_size, quoted
from gputop.core.records import frozen

_OFF = frozenset({"0", "off", "no", "false"})


def _value(name: str, environ: Mapping[str, str] | None) -> str:
    return (os.environ if environ is None else environ).get(name, "").strip()


@frozen
class Text:
    """A text (a path, a URL, a scenario); ``read`` is ``default`` when unset or blank
    (``shown``: the default in words, where the caller works it out)."""

    name: str
    meaning: str
    default: str = ""
    shown: str = ""

    def read(self, environ: Mapping[str, str] | None = None) -> str:
        given = self.given(environ) or ""
        return given if given.strip() else self.default

    def given(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The value as given (even empty), None where it is unset."""
        return (os.environ if environ is None else environ).get(self.name)

    @property
    def shown_default(self) -> str:
        return self.shown or self.default or "unset"


@frozen
class Flag:
    """On or off: ``0``, ``off``, ``no`` and ``false`` are off, any other value on."""

    name: str
    meaning: str
    default: bool = False

    def on(self, environ: Mapping[str, str] | None = None) -> bool:
        text = _value(self.name, environ).lower()
        return self.default if not text else text not in _OFF

    @property
    def shown_default(self) -> str:
        return "on" if self.default else "off"


@frozen
class Seconds:
    """A finite number (of seconds, or a speed) from ``minimum`` to ``maximum``; a bad one
    is refused with ``refusal`` (else numbers.py's words)."""

    name: str
    meaning: str
    default: float
    minimum: float
    maximum: float
    shown_default: str
    refusal: str = ""

    def given(self, environ: Mapping[str, str] | None = None) -> float | None:
        """The value; None when unset; a UsageError naming it and its range when bad."""
        text = _value(self.name, environ)
        if not text:
            return None
        try:
            return parse_seconds(text, self.name, self.minimum, self.maximum)
        except UsageError:
            if not self.refusal:
                raise
            raise UsageError(f"{self.name}={quoted(text)} {self.refusal}") from None

    def read(self, environ: Mapping[str, str] | None = None) -> float:
        """The value, the default when unset, else a UsageError (``given``)."""
        value = self.given(environ)
        return self.default if value is None else value

    def or_default(self, environ: Mapping[str, str] | None = None) -> float:
        """The value, or the default where it is unset or bad (a job already running)."""
        try:
            return self.read(environ)
        except UsageError:
            return self.default


@frozen
class Size:
    """A size in bytes (``1G``, ``512M``, ``64k``) up to ``maximum``; a bad one: the default."""

    name: str
    meaning: str
    default: int
    maximum: int
    shown_default: str

    def or_default(self, environ: Mapping[str, str] | None = None) -> int:
        text = _value(self.name, environ)
        try:
            value = parse_size(text, self.name) if text else self.default
        except ValueError:
            return self.default
        return value if value <= self.maximum else self.default


@frozen
class Count:
    """A whole number from ``minimum`` to ``maximum`` (ASCII digits)."""

    name: str
    meaning: str
    default: int
    minimum: int
    maximum: int
    unit: str = ""
    kind: str = "number"

    def read(self, environ: Mapping[str, str] | None = None) -> int:
        text = _value(self.name, environ)
        if not text:
            return self.default
        digits = is_ascii_digits(text) and len(text) <= len(str(self.maximum))
        if digits and self.minimum <= int(text) <= self.maximum:
            return int(text)
        raise UsageError(
            f"{self.name}={quoted(text)} is not a {self.kind}: give {self.meaning}, a whole number "
            f"from {self.minimum} to {self.maximum} (default {self.default})."
        )

    @property
    def shown_default(self) -> str:
        return f"{self.default} {self.unit}".strip()


# --- where gputop works -----------------------------------------------------------------
STATE_DIR = Text(
    "GPUTOP_STATE_DIR",
    "the directory of the job store, logs and history",
    shown="$XDG_STATE_HOME/gputop, else ~/.local/state/gputop",
)
HISTORY_DB = Text(
    "GPUTOP_HISTORY_DB",
    "the history store read (and recorded without --db): a shared one an admin runs",
    shown="history.sqlite3 in the state directory",
)
HISTORY_MAX_WAL = Count(
    "GPUTOP_HISTORY_MAX_WAL_MB",
    "the most MiB the history store's -wal may reach while a reader holds it back",
    64,
    1,
    65536,
    "MiB",
    "size",
)
CLAIMS_DIR = Text(
    "GPUTOP_CLAIMS_DIR", "the claims directory every user shares", "/var/lib/gputop/claims"
)
KERNEL_LOG = Text(
    "GPUTOP_KERNEL_LOG",
    "the kernel log Xids are read from on real GPUs (empty: none)",
    shown="/dev/kmsg",
)
PROMETHEUS = Text("GPUTOP_PROMETHEUS", "the URL --prometheus without a URL uses")
SSH_CONFIG = Text("GPUTOP_SSH_CONFIG", "an ssh config file for the lab's hosts (ssh -F)")
SSH_OPTIONS = Text("GPUTOP_SSH_OPTIONS", "more ssh options for the lab's hosts (split as a shell)")
REMOTE_PATH = Text(
    "GPUTOP_PATH", "on a lab host: directories searched first for gputop (sshd's SetEnv)"
)

# --- jobs ---------------------------------------------------------------------------------
WAIT_POLL = Seconds(
    "GPUTOP_WAIT_POLL_S", "seconds between a waiting job's GPU polls", 5.0, 0.05, 300.0, "5 s"
)
USAGE_POLL = Seconds(
    "GPUTOP_USAGE_POLL_S", "seconds between a running job's usage samples", 5.0, 0.05, 300.0, "5 s"
)
RECORD_GIVE_UP = Seconds(
    "GPUTOP_RECORD_GIVE_UP_S",
    "how long a supervisor with no reserved end file tries to record its job's end",
    3600.0,
    0.0,
    86400.0,
    "3600 s",
)
LOG_MAX = Size("GPUTOP_LOG_MAX", "a job log's size cap (--log-max)", 1024**3, 1024**5, "1G")
LOG_FLOOR = Size(
    "GPUTOP_LOG_FLOOR",
    "the free space under which a job log is cut to its beginning and newest 64 KiB (0: off)",
    256 * 1024**2,
    1024**5,
    "256M",
)
JOB_ID = Text("GPUTOP_JOB_ID", "set by gputop in a job's environment: its job id")
JOB_TOKEN = Text("GPUTOP_JOB_TOKEN", "set by gputop in a job's environment: its random token")
IGNORED_CLAIMS = Text(
    "GPUTOP_IGNORED_CLAIMS",
    "set by gputop in a job launched with --ignore-claims: the claims it was launched over",
)

# --- simulated GPUs and debugging ---------------------------------------------------------
FAKE = Text("GPUTOP_FAKE", "a scenario name or file: simulated GPUs (as --fake)")
FAKE_TIME = Seconds(
    "GPUTOP_FAKE_TIME",
    "the scenario time to freeze simulated GPUs at, in seconds since it started",
    0.0,
    0.0,
    253402300799.0,
    "unset: the simulated clock runs",
    "is not a time: give the scenario time to freeze at, in seconds since the scenario "
    "started (e.g. 30).",
)
FAKE_SPEED = Seconds(
    "GPUTOP_FAKE_SPEED",
    "how many times faster than real time simulated GPUs run (600: ten minutes a second)",
    1.0,
    1.0,
    1_000_000.0,
    "1",
    "is not a speed: give how many times faster than real time simulated GPUs run, from 1 "
    "to 1000000 (e.g. 600: ten minutes a second).",
)
DEBUG = Flag("GPUTOP_DEBUG", "an internal error shows its traceback")
DEBUG_HINT = f"run again with {DEBUG.name}=1 to see where, and please report it"
"""What a message about a bug in gputop asks of the person who met it."""
SCREEN_DIFF = Flag("GPUTOP_SCREEN_DIFF", "the dashboard writes only the cells that changed", True)

ALL = tuple(
    v for v in tuple(globals().values()) if isinstance(v, (Text, Flag, Seconds, Size, Count))
)
"""Every variable gputop reads or sets (a notify command's are in jobs/notify.py)."""

REMOTE_PATH_FIRST = "${GPUTOP_PATH:+$GPUTOP_PATH:}"
"""The remote shell's start of ``PATH``: ``REMOTE_PATH``'s directories first, where set."""
