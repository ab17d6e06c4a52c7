"""A claim file's content and what the kernel says of it (gputop/core/claims/files.py):
whatever a file holds, reading it gives a reason, never an exception; its place in the
order is its birth time where the file system keeps one."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gputop.core.claims.files import (
    CONTENT_BYTES,
    Claim,
    content,
    new_name,
    parse_content,
    parse_name,
    stat_file,
)

UUID = "GPU-" + "5" * 32


def claim_file(tmp_path: Path, data: bytes) -> tuple[str, Path]:
    name = new_name(UUID, os.geteuid(), False)
    path = tmp_path / name
    path.write_bytes(data)
    return name, path


@pytest.mark.parametrize(
    "data",
    [
        b"[" * CONTENT_BYTES,
        b'{"a":' * 200,
        b'{"v":1,"uuid":"'
        + UUID.encode()
        + b'","gpu":1,"uid":0,"user":"root","until":'
        + b"9" * 401
        + b',"note":"","job":null}',
        b'{"v":1,"until":1e400}',
        b'{"v":1,"until":NaN}',
        b"\xff\xfe\x00" * 300,
        b'{"v":1,"uuid":"' + UUID.encode() + b'","gpu":1,"uid":0,"user":"root",'
        b'"until":"soon","note":"","job":null}',
        b'{"v":1,"uuid":"' + UUID.encode() + b'","gpu":1,"uid":0,"user":"root",'
        b'"until":true,"note":"","job":null}',
        b'{"v":1,"uuid":"' + UUID.encode() + b'","gpu":1,"uid":0,"user":"root",'
        b'"until":1e300,"note":"","job":null}',
        b'{"v":1,"uuid":["x"],"gpu":{"a":[[[]]]},"uid":0}',
    ],
)
def test_whatever_a_file_holds_is_a_reason_never_an_exception(tmp_path: Path, data: bytes) -> None:
    name, path = claim_file(tmp_path, data.ljust(CONTENT_BYTES))
    parsed = parse_name(name)
    assert parsed is not None
    directory = os.open(tmp_path, os.O_RDONLY)
    try:
        said = parse_content(path.read_bytes(), name, parsed, stat_file(directory, name))
    finally:
        os.close(directory)
    assert isinstance(said, str) and said


def test_a_written_claim_is_believed_and_placed_at_its_birth(tmp_path: Path) -> None:
    user = __import__("pwd").getpwuid(os.geteuid()).pw_name
    data = content(UUID, 1, os.geteuid(), user, time.time() + 60, "", None)
    name, path = claim_file(tmp_path, data)
    directory = os.open(tmp_path, os.O_RDONLY)
    try:
        born = stat_file(directory, name)
        os.link(path, tmp_path / "another-name")  # moves the change time, not the birth
        linked = stat_file(directory, name)
    finally:
        os.close(directory)
    assert linked.st_nlink == 2 and linked.st_ctime_ns >= born.st_ctime_ns
    if born.birth_ns is None:
        pytest.skip("this file system keeps no birth time")
    assert linked.place_ns == born.place_ns == born.birth_ns
    parsed = parse_name(name)
    assert parsed is not None
    claim = parse_content(data, name, parsed, linked)
    assert isinstance(claim, Claim)  # a hard link is no reason to ignore it
    assert claim.order == (born.birth_ns, name) and claim.place_fixed
    opened = os.open(path, os.O_RDONLY)
    try:
        assert stat_file(opened).st_ino == born.st_ino  # an open file, by its descriptor
    finally:
        os.close(opened)
