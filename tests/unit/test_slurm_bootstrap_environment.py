"""The Slurm usage wrapper's bootstrap (usage_wrapper.BOOTSTRAP) hands its command the
environment it started with, whatever that environment holds, and the command always runs.

The kernel passes any bytes as an environment entry; a batch step started by something
other than a POSIX shell (or one that passes on what it cannot import) may hold an entry
with no name (``=x``), one name twice or bytes that are not UTF-8. Python's ``execve``
refuses an empty name with ValueError, which the bootstrap's ``OSError`` guard did not
catch: the command never ran. A name given twice is the first entry's (as ``getenv`` and
the sampler's reader of environments give it). Here the bootstrap is started by a raw
``execve`` (no shell in between to clean the entries), outside Slurm, so it starts no
meter and only ``exec``'s the command.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import gputop
from gputop.core.slurm.usage_wrapper import BOOTSTRAP

RAW_EXECVE = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def strings(items):
    return (ctypes.c_char_p * (len(items) + 1))(*items, None)
argv = [os.fsencode(a) for a in sys.argv[1:sys.argv.index("--env")]]
env = [os.fsencode(a) for a in sys.argv[sys.argv.index("--env") + 1:]]
libc.execve(argv[0], strings(argv), strings(env))
sys.exit(f"execve: {os.strerror(ctypes.get_errno())}")
"""
"""``python -c RAW_EXECVE ARGV... --env ENTRY...``: ``execve`` exactly these entries."""


def run_bootstrap(
    tmp_path: Path, entries: list[bytes], package_dir: Path = Path(gputop.__file__).parent
) -> tuple[list[bytes], bytes]:
    """The entries the bootstrap's command (``env -0``) was given, and its stderr."""
    env_command = shutil.which("env")
    assert env_command is not None
    argv = [sys.executable, "-E", "-c", BOOTSTRAP, str(package_dir)]
    argv += [str(tmp_path / "logs"), env_command, "-0"]
    launcher = [sys.executable, "-c", RAW_EXECVE, *argv, "--env", *map(os.fsdecode, entries)]
    done = subprocess.run(launcher, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split(b"\0")[:-1], done.stderr


def test_an_entry_with_no_name_does_not_keep_the_command_from_running(tmp_path: Path) -> None:
    entries, stderr = run_bootstrap(tmp_path, [b"=x", b"KEPT=1", b"NO_EQUALS"])
    assert entries == [b"KEPT=1"], stderr  # nothing could read the other two by name


def test_without_gputop_an_entry_with_no_name_is_left_out_as_well(tmp_path: Path) -> None:
    entries, stderr = run_bootstrap(tmp_path, [b"=x", b"KEPT=1"], tmp_path / "no-gputop")
    assert entries[0] == b"KEPT=1", stderr  # then Python's own LC_CTYPE may follow
    assert not any(entry.startswith(b"=") for entry in entries)


def test_a_name_given_twice_is_the_first_entry_as_getenv_gives_it(tmp_path: Path) -> None:
    entries, _ = run_bootstrap(tmp_path, [b"A=first", b"B=\xff\xfe", b"A=second"])
    assert entries == [b"A=first", b"B=\xff\xfe"]  # no LC_CTYPE: Python's start added it


def test_an_environment_of_a_mib_and_a_half_reaches_the_command_whole(tmp_path: Path) -> None:
    padding = [b"PAD_%02d=" % n + b"x" * 100_000 for n in range(15)]
    entries, _ = run_bootstrap(tmp_path, [*padding, b"LAST=1"])
    assert entries == [*padding, b"LAST=1"]
