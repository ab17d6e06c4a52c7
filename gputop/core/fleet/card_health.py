"""A fleet card's health from its series: the reading the core's verdict weighs
(gputop/core/health.py), that verdict, and the ``health`` object of ``snapshot --json``
(docs/fleet.md, docs/health.md)."""

from __future__ import annotations

from typing import Protocol

from gputop.core.health import LEVELS, Reason, Verdict
from gputop.core.health import verdict as judge
from gputop.core.model import EccCounts, GpuHealth, RemappedRows, RetiredPages, XidEvent


class FleetGpu(Protocol):
    """What of a fleet card (gputop/core/fleet/model.py's ``FleetGpu``) its health reads."""

    xid: int | None
    uncorrected_ecc: int | None
    row_remap_pending: bool | None
    row_remap_failed: bool | None
    retired_pages_pending: bool | None
    reported_level: int | None
    lost: bool | None
    sample_error: bool | None
    no_access: bool | None
    verdict: Verdict


def health_reading(gpu: FleetGpu) -> GpuHealth | None:
    """The health the series give, as the local sampler would hold it (``None``: no
    series of it), for the core's verdict. Only what decides a verdict is exported
    that way: the uncorrectable ECC errors this boot, the row remapper's and the page
    retirement's flags, and the last Xid (when it came is not exported)."""
    flags = (gpu.row_remap_pending, gpu.row_remap_failed, gpu.retired_pages_pending)
    if gpu.xid is None and gpu.uncorrected_ecc is None and all(f is None for f in flags):
        return None
    rows = None
    if gpu.row_remap_pending is not None or gpu.row_remap_failed is not None:
        rows = RemappedRows(
            correctable=0,  # not read: the verdict does not weigh them
            uncorrectable=0,
            pending=bool(gpu.row_remap_pending),
            failed=bool(gpu.row_remap_failed),
        )
    pages = None
    if gpu.retired_pages_pending is not None:
        pages = RetiredPages(pending=gpu.retired_pages_pending)
    return GpuHealth(
        ecc=None if gpu.uncorrected_ecc is None else EccCounts(None, gpu.uncorrected_ecc),
        retired_pages=pages,
        remapped_rows=rows,
        xid_events=None if gpu.xid is None else ((XidEvent(gpu.xid, 0.0),) if gpu.xid > 0 else ()),
    )


def card_verdict(gpu: FleetGpu) -> Verdict:
    """The core's verdict on the series; where gputop's exporter said worse (an earlier
    Xid 79 behind a last Xid 13), its word first."""
    result = judge(health_reading(gpu))
    said = gpu.reported_level
    if said is None or said <= result.value:
        return result
    level = next(name for name, value in LEVELS.items() if value == said)
    told = Reason(
        level,
        f"{level} by gputop on its node",
        "see the card's health on the node (gputop snapshot)",
        f"{level} on its node",
    )
    return Verdict(level, (told, *result.reasons))


def health_json(gpu: FleetGpu) -> dict[str, object] | None:
    """``snapshot --json``'s ``health`` of a fleet card: its signals and the verdict."""
    signals = {
        "lost": gpu.lost,
        "sample_error": gpu.sample_error,
        "no_access": gpu.no_access,
        "last_xid": gpu.xid,
        "uncorrected_ecc_errors": gpu.uncorrected_ecc,
        "row_remap_pending": gpu.row_remap_pending,
        "row_remap_failed": gpu.row_remap_failed,
        "retired_pages_pending": gpu.retired_pages_pending,
    }
    if all(value is None for value in signals.values()) and gpu.reported_level is None:
        return None
    result = gpu.verdict
    return {
        **signals,
        **result.as_json(),
        "healthy": result.level == "ok" and not gpu.lost and not gpu.sample_error,
    }
