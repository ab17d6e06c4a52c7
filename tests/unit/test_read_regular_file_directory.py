"""A directory where the user named a file (hosts.toml, ``--prometheus-auth-file``, an ssh
config or a file it ``Include``s) is refused as not a regular file, as a FIFO or a device
is, and leaves no descriptor open.

``os.fdopen`` refuses a directory's descriptor with IsADirectoryError before
``read_regular_file`` looks at what it opened, and does not close a descriptor it was
given: every ssh config ``Include`` that matched a directory cost the dashboard one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputop.core.errors import UsageError
from gputop.core.private_files import NotRegularFile, read_regular_file
from gputop.core.prometheus.auth import read_auth_file


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_directory_is_not_a_regular_file_and_keeps_no_descriptor(tmp_path: Path) -> None:
    before = open_descriptors()
    for _ in range(20):
        with pytest.raises(NotRegularFile):
            read_regular_file(tmp_path, 1 << 20)
    assert open_descriptors() == before


def test_a_directory_as_the_auth_file_is_named_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a regular file"):
        read_auth_file(str(tmp_path))
