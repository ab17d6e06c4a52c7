"""A card's health under its history (``H`` on a card): the verdict with every reason and
what to do, each counter (or that the card does not have it), and its Xids with their time,
meaning and action (docs/health.md). gputop's own words only: nothing here comes from the
driver as text."""

from __future__ import annotations

from rich.text import Text

from gputop.core.health import verdict
from gputop.core.model import GpuHealth
from gputop.core.safe_text import clean
from gputop.core.units import local_time
from gputop.core.xid import describe

_LEVEL_STYLES = {"ok": "green", "warning": "bold yellow", "critical": "bold red"}
NOT_HERE = "not on this card"


def render_health(health: GpuHealth | None) -> list[Text]:
    """The health section's lines; one line saying so where the card was not read."""
    lines = [Text("")]
    if health is None:
        lines.append(Text("Health: not read (the card is lost or refused)", style="dim"))
        return lines
    result = verdict(health)
    lines.append(Text.assemble(("Health: ", "bold"), (result.level, _LEVEL_STYLES[result.level])))
    for reason in result.reasons:
        lines.append(
            Text.assemble(
                ("  ✖ " if reason.level == "critical" else "  ⚠ ", _LEVEL_STYLES[reason.level]),
                reason.text,
                (f": {reason.action}", "dim"),
            )
        )
    lines += [_row(name, value) for name, value in counter_rows(health)]
    lines += _xid_lines(health)
    if health.refused:
        lines.append(_row("not allowed", clean(", ".join(health.refused))))  # a host's words
    return lines


def counter_rows(health: GpuHealth) -> list[tuple[str, str]]:
    """Each counter's name and reading, or that the card does not have it (also the health
    screen's, screens/health.py)."""
    ecc, pages, rows = health.ecc, health.retired_pages, health.remapped_rows
    return [
        ("ECC errors", NOT_HERE if ecc is None else (
            f"this boot {_n(ecc.corrected_volatile)} corrected, "
            f"{_n(ecc.uncorrected_volatile)} uncorrectable · over its life "
            f"{_n(ecc.corrected_aggregate)} corrected, "
            f"{_n(ecc.uncorrected_aggregate)} uncorrectable"
        )),
        ("retired pages", NOT_HERE if pages is None else (
            f"{_n(pages.single_bit)} for single-bit errors, {_n(pages.double_bit)} for "
            f"double-bit, pending {_yes(pages.pending)}"
        )),
        ("remapped rows", NOT_HERE if rows is None else (
            f"{rows.correctable} correctable, {rows.uncorrectable} uncorrectable, "
            f"pending {_yes(rows.pending)}, failed {_yes(rows.failed)}"
        )),
        ("PCIe replays", NOT_HERE if health.pcie_replays is None else str(health.pcie_replays)),
        ("NVLink CRC errors", NOT_HERE if health.nvlink_crc_errors is None
            else str(health.nvlink_crc_errors)),
    ]  # fmt: skip


XIDS_UNKNOWN = "unknown: neither NVML's events nor the kernel log is open to you"


def xids_in_all(health: GpuHealth) -> str | None:
    """``Xid 13: 1, Xid 79: 3`` where the events kept do not count every Xid (also the health
    screen's)."""
    totals = dict(health.xid_counts)
    if sum(totals.values()) <= sum(e.count for e in health.xid_events or ()):
        return None
    return ", ".join(f"Xid {code}: {n}" for code, n in sorted(totals.items()))


def _xid_lines(health: GpuHealth) -> list[Text]:
    if health.xid_events is None:
        return [_row("Xids", XIDS_UNKNOWN)]
    sources = " and ".join(health.xid_sources)
    if not health.xid_events:
        return [_row("Xids", f"none since gputop started (from {sources})")]
    lines = [_row("Xids", f"from {sources}, newest last")]
    for event in health.xid_events:
        info = describe(event.xid)
        count = f" ({event.count}x)" if event.count > 1 else ""
        lines.append(
            Text.assemble(
                f"    {local_time(event.time)}  ",
                (f"Xid {event.xid} {info.short}{count}", _LEVEL_STYLES[info.severity]),
                f"  {info.meaning} ",
                (info.action[:1].upper() + info.action[1:], "dim"),  # a sentence of its own
            )
        )
    if (counted := xids_in_all(health)) is not None:
        lines.append(Text(f"    in all: {counted}", style="dim"))
    return lines


def _row(name: str, value: str) -> Text:
    return Text.assemble((f"  {name:<18}", "bold"), value)


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _yes(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")
