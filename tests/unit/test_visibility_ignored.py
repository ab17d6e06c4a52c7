"""Entries the driver reads as a number while dropping the rest: said, not silent (issue 28).

The driver reads an integer entry like strtoul (docs/cuda-visibility.md, rule 4): ``1 2`` is
GPU 1 alone and ``0:1`` is GPU 0, which is rarely what was meant.
"""

from __future__ import annotations

import pytest

from gputop.core.visibility import resolve_visibility
from gputop.core.visibility.order import PCI_BUS_ID


@pytest.mark.parametrize(
    ("value", "selected", "says"),
    [
        ("1 2", [1], "is read as 1, ignoring ' 2': GPUs are separated by commas only"),
        ("0:1", [0], "is read as 0, ignoring ':1': it looks like a MIG device"),
        ("1gpu2,2", [1, 2], "is read as 1, ignoring 'gpu2'"),
        ("3\t1", [3], "is read as 3, ignoring '\\t1'"),
    ],
)
def test_a_dropped_rest_is_read_as_the_driver_does_and_said(
    fake_backend, value: str, selected: list[int], says: str
) -> None:  # type: ignore[no-untyped-def]
    gpus = fake_backend("v100x4").sample().gpus
    seen = resolve_visibility(gpus, "550.127.05", value, PCI_BUS_ID)
    assert [d.physical_index for d in seen.devices] == selected
    ignored = [w for w in seen.warnings if w.code == "ignored-rest"]
    assert len(ignored) == 1 and says in ignored[0].message


@pytest.mark.parametrize("value", ["1,2", " 1, 2 ", "+1", "00"])
def test_plain_numbers_and_blanks_are_not_flagged(fake_backend, value: str) -> None:  # type: ignore[no-untyped-def]
    gpus = fake_backend("v100x4").sample().gpus
    seen = resolve_visibility(gpus, "550.127.05", value, PCI_BUS_ID)
    assert not [w for w in seen.warnings if w.code == "ignored-rest"]
