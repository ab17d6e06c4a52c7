"""Tests with a real second user (docs/testing.md lists the files): two fresh users made with
useradd for the session (claims), or uid 65534 (nobody) running gputop or reading what root's
gputop wrote. They need root; without it they skip saying why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import claims, other_user
from helpers.claims import User


@pytest.fixture(scope="session", name="two_users")
def two_users_fixture() -> Iterator[tuple[User, User]]:
    """Two fresh users, ``ana…`` and ``bob…``, with a suffix unique to this session."""
    yield from claims.two_users()


@pytest.fixture(name="shared_dir")
def shared_dir_fixture() -> Iterator[Path]:
    """A world-writable sticky directory, like /tmp, that both users can reach."""
    yield from other_user.shared_dir()


@pytest.fixture(name="other_users_dir")
def other_users_dir_fixture(shared_dir: Path) -> Path:
    """A directory of the other user's, where it can run gputop with a store of its own."""
    return other_user.other_users_dir(shared_dir)
