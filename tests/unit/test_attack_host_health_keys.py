"""A host's Xid counts keyed by what Python calls digits and ``int()`` refuses or reads as
another number (``²``, ``٣``, ``３``): the line is refused as that field's fault
(ProtocolError naming ``xid_counts``), as any other bad field of a host's is, and never
counted as some other Xid."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers.hostile_hosts import good_document

from gputop.core.remote.protocol import ProtocolError, snapshot_from_json


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return good_document("faulty")


@pytest.mark.parametrize("code", ["²", "4²", "٣", "３", "7\u0663"])
def test_an_xid_code_in_no_ascii_digits_is_the_fields_fault(
    document: dict[str, Any], code: str
) -> None:
    sent = copy.deepcopy(document)
    sent["gpus"][0]["health"]["xid_counts"] = {code: 1}
    with pytest.raises(ProtocolError, match="xid_counts"):
        snapshot_from_json(sent)


def test_an_xid_code_in_ascii_digits_is_still_read(document: dict[str, Any]) -> None:
    sent = copy.deepcopy(document)
    sent["gpus"][0]["health"]["xid_counts"] = {"79": 2}
    health = snapshot_from_json(sent).gpus[0].health
    assert health is not None and health.xid_counts == ((79, 2),)
