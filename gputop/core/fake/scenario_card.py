"""What a scenario card says beyond its readings (docs/scenario.md): its health, its clock
event reasons and GPM activity, each checked against the card's kind (an ECC board, Ampere,
Hopper), as a real driver answers only on the cards that have them."""

from __future__ import annotations

from gputop.core.clock_events import REASONS, mask_from_names
from gputop.core.errors import ScenarioError
from gputop.core.fake.json_fields import ObjectReader
from gputop.core.fake.scenario_types import (
    ACTIVITY_SIGNALS,
    ActivitySignals,
    ClockEventWindow,
    ScenarioHealth,
    ScenarioXid,
    keys_of,
)

HEALTH_KEYS = keys_of(ScenarioHealth)
"""A card's health answers (docs/scenario.md, fake/health_calls.py)."""
AMPERE = (8, 0)
"""Row remapping replaces page retirement from compute capability 8.0 on."""
_CLOCK_WINDOW_KEYS = ("reasons", "from_s", "until_s", "period_s")
HOPPER = (9, 0)
"""GPM answers on compute capability 9.0 and newer."""


def compute_capability(gpu: ObjectReader) -> tuple[int, int] | None:
    value = gpu.data.get("cuda_compute_capability")
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise gpu.error("cuda_compute_capability", f"must be [major, minor], got {value!r}")
    major = gpu.check_integer("cuda_compute_capability[0]", value[0], minimum=1)
    minor = gpu.check_integer("cuda_compute_capability[1]", value[1])
    return (major, minor)


def activity_of(owner: ObjectReader) -> ActivitySignals | None:
    activity = owner.child("activity", ACTIVITY_SIGNALS)
    if activity is None:
        return None
    return ActivitySignals(**{key: activity.signal(key) for key in ACTIVITY_SIGNALS})


def needs_hopper(gpu: ObjectReader, field: str) -> None:
    """GPM figures exist on Hopper and newer only, as on a real driver."""
    capability = compute_capability(gpu)
    if capability is not None and capability < HOPPER:
        raise ScenarioError(
            gpu.path,
            "GPM activity needs a Hopper or newer GPU (cuda_compute_capability 9.0 or more), "
            f"got {capability[0]}.{capability[1]}",
            field,
        )


def hopper_activity(gpu: ObjectReader) -> ActivitySignals | None:
    activity = activity_of(gpu)
    if activity is not None:
        needs_hopper(gpu, gpu.field("activity"))
    return activity


def clock_event_reasons(gpu: ObjectReader) -> tuple[ClockEventWindow, ...]:
    windows = []
    for where, item in gpu.items("clock_event_reasons"):
        window = ObjectReader(gpu.path, item, where, _CLOCK_WINDOW_KEYS)
        names = window.strings("reasons")
        try:
            mask = mask_from_names(names)
        except ValueError as error:
            known = ", ".join(name for _, name, _ in REASONS)
            raise window.error(
                "reasons", f"{str(error)!r} is not a clock event reason (known: {known})"
            ) from None
        start = window.number("from_s") or 0.0
        until = window.number("until_s", required=True)
        assert until is not None
        if until <= start:
            raise window.error("until_s", f"must be after from_s ({start:g}), got {until:g}")
        period = window.number("period_s")
        if period is not None and period < until:
            raise window.error("period_s", f"must be at least until_s ({until:g})")
        windows.append(ClockEventWindow(mask, start, until, period))
    return tuple(windows)


def health(gpu: ObjectReader) -> ScenarioHealth:
    """The health answers, checked against the card's kind: ECC counts need an ECC board
    (``ecc_uncorrected_volatile``), retired pages one before Ampere, remapped rows Ampere or
    newer, NVLink errors links."""
    has_ecc = gpu.data.get("ecc_uncorrected_volatile") is not None
    for key in ("ecc_corrected_volatile", "ecc_corrected_aggregate", "ecc_uncorrected_aggregate"):
        if gpu.data.get(key) is not None and not has_ecc:
            raise gpu.error(key, "needs an ECC board: give ecc_uncorrected_volatile too")
    capability = compute_capability(gpu)
    ampere = capability is not None and capability >= AMPERE
    pages = gpu.child("retired_pages", ("single_bit", "double_bit", "pending"))
    retired = None
    if pages is not None:
        if not has_ecc or ampere:
            raise gpu.error(
                "retired_pages",
                "pages are retired on ECC boards before Ampere (compute capability below 8.0, "
                "with ecc_uncorrected_volatile)",
            )
        retired = (
            pages.integer("single_bit") or 0,
            pages.integer("double_bit") or 0,
            bool(pages.flag("pending")),
        )
    rows = gpu.child("remapped_rows", ("correctable", "uncorrectable", "pending", "failed"))
    remapped = None
    if rows is not None:
        if not has_ecc or not ampere:
            raise gpu.error(
                "remapped_rows",
                "rows are remapped on ECC boards of Ampere and newer (compute capability 8.0 "
                "or more, with ecc_uncorrected_volatile)",
            )
        remapped = (
            rows.integer("correctable") or 0,
            rows.integer("uncorrectable") or 0,
            bool(rows.flag("pending")),
            bool(rows.flag("failed")),
        )
    crc = gpu.integer("nvlink_crc_errors")
    if crc is not None and not gpu.data.get("nvlink_count"):
        raise gpu.error("nvlink_crc_errors", "needs NVLink links: give nvlink_count")
    events = []
    for where, item in gpu.items("xid_events"):
        event = ObjectReader(gpu.path, item, where, ("at_s", "xid", "count"))
        xid = event.integer("xid", required=True, minimum=1, maximum=2**32 - 1)
        assert xid is not None
        count = event.integer("count", minimum=1, maximum=10_000_000)
        events.append(ScenarioXid(event.number("at_s") or 0.0, xid, count or 1))
    return ScenarioHealth(
        ecc_corrected_volatile=gpu.integer("ecc_corrected_volatile"),
        ecc_corrected_aggregate=gpu.integer("ecc_corrected_aggregate"),
        ecc_uncorrected_aggregate=gpu.integer("ecc_uncorrected_aggregate"),
        retired_pages=retired,
        remapped_rows=remapped,
        pcie_replays=gpu.integer("pcie_replays"),
        nvlink_crc_errors=crc,
        xid_events=tuple(sorted(events, key=lambda e: e.at_s)),
    )
