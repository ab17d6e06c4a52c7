"""Every signal gputop sends goes out from gputop/core/process_control.py, beside the
identity checks (same boot, start time, session, user) that make sending it safe."""

from __future__ import annotations

import ast

from helpers import REPO

PACKAGE = REPO / "gputop"
SENDERS = {"kill", "killpg", "pidfd_send_signal"}


def _modules_calling_a_sender() -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in SENDERS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in ("os", "signal")
            ):
                found.add(path.relative_to(PACKAGE.parent).as_posix())
    return found


def test_only_process_control_sends_signals() -> None:
    assert _modules_calling_a_sender() == {"gputop/core/process_control.py"}
