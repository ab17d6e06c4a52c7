"""Tests that start real components (a C compiler, sshd, unshare) skip only with a reason.

CI sets ``GPUTOP_REQUIRE_REAL=1`` (in .ci/run, after installing what they need): there a
missing component fails the test instead, so nothing is skipped silently in CI.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRE_ENV = "GPUTOP_REQUIRE_REAL"


def cannot(reason: str) -> NoReturn:
    """Skip, saying why; where ``GPUTOP_REQUIRE_REAL`` is set, fail instead."""
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{reason} ({REQUIRE_ENV} is set: this test must run here)")
    pytest.skip(reason)
