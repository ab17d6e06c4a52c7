"""One GPU card's text: bars, a utilisation sparkline, temperature, power, fan, clocks, MIG,
its title and subtitle. ``GpuGrid`` draws the cards (both dashboards'), repainting a card
only when its ``CardView`` changed, which keeps the bytes sent over SSH down.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.widget import Widget

from gputop.core.clock_events import badge_labels
from gputop.core.health import badge, verdict
from gputop.core.health import mark as health_mark
from gputop.core.model import Activity, GpuSample
from gputop.core.records import frozen
from gputop.core.safe_text import clean
from gputop.core.units import NA, duration_coarse, memory_pair, mib, power_pair
from gputop.tui.render import (
    assembled,
    bar,
    level_style,
    percent_of,
    sparkline,
    temperature_style,
)
from gputop.tui.safe import plain
from gputop.tui.textual_compat import visual_strips


@frozen
class CardView:
    gpu: GpuSample
    history: tuple[int | None, ...]
    highlighted: bool
    selected: bool
    compact: bool
    mig_cursor: int | None = None
    """Position in ``gpu.mig_devices`` of the highlighted MIG instance, if one is."""
    mig_selected: frozenset[str] = frozenset()
    """UUIDs of this card's selected MIG instances."""
    util_style: str | None = None
    """The utilisation's colour, kept steady by the grid (``sticky_level_style``)."""
    slurm: str | None = None
    """The Slurm job holding the card (``slurm 123 alice train 1:02:03 left``), cleaned."""
    claim: str | None = None
    """Who claimed the card (``claimed by ana · 2h left · note``), and who uses it without a
    claim (docs/claims.md), cleaned."""


class LineStrips:
    """Card lines as Textual renders a widget's text, one line alone.

    A line's styles depend only on where its spans are, so a line shaped like one rendered
    before (the sparkline, the clocks: the same spans, other characters) reuses that
    rendering's styles with its own characters.
    """

    def __init__(self) -> None:
        self._shapes: dict[tuple[object, ...], list[tuple[int, int, Style | None]]] = {}

    def strip(
        self, widget: Widget, y: int, line: Text, width: int, visual_style: VisualStyle
    ) -> Strip:
        """``line`` as ``widget`` renders it on its row ``y`` (text selection reads the row
        from the styles), in ``width`` cells or fewer."""
        plain = line.plain
        one_cell_each = cell_len(plain) == len(plain)
        shape = (y, width, visual_style, line.style, tuple(line.spans), len(plain))
        template = self._shapes.get(shape) if one_cell_each else None
        if template is not None:
            segments = [Segment(plain[start:end], style) for start, end, style in template]
            return Strip(segments, len(plain))
        # The line alone, on its row: the blank lines above it are cheap.
        text = Text("\n").join([*(Text() for _ in range(y)), line.copy()])
        strip = visual_strips(widget, text, width, y + 1, visual_style)[y]
        if one_cell_each and "".join(segment.text for segment in strip) == plain:
            if len(self._shapes) > 64:
                self._shapes.clear()
            template, start = [], 0
            for segment in strip:
                template.append((start, start + len(segment.text), segment.style))
                start += len(segment.text)
            self._shapes[shape] = template
        return strip


def _lines_for(view: CardView, width: int) -> tuple[int, list[Text], list[tuple[object, ...]]]:
    lines = [_compact_line(view, width)] if view.compact else _full_card_lines(view, width)
    return width, lines, [(line.plain, line.style, tuple(line.spans)) for line in lines]


def _title(view: CardView) -> str:
    mark = "●" if view.selected else "○"
    uuid = clean(view.gpu.short_uuid or "GPU-????????")
    return f"{mark} {view.gpu.physical_index}  {uuid}"


LABEL_CELLS_RESERVED = 6
"""Cells of a bordered card's width a border label cannot use: the two corners, a line
beside each and a blank on each side of the label."""

SEPARATOR = " · "


def _subtitle(view: CardView, room: int | None = None) -> str | None:
    """The card's bottom border: claim, Slurm job, state, throttle badge. Where ``room``
    (cells) is short, the claim gives way first, then the Slurm job, each cut with an
    ellipsis: the state and the throttle badge keep their place."""
    state = _state(view.gpu)
    gpu = view.gpu
    if not gpu.processes_listed and not (gpu.lost or gpu.no_access):
        # NVML would not list its processes: the table cannot say who uses this card.
        unlisted = "processes: not listed"
        state = unlisted if state is None else f"{unlisted} · {state}"
    kept = [part for part in (state, health_badge(gpu), throttle_badge(gpu)) if part]
    cuttable = [part for part in (view.claim, view.slurm) if part]
    return _fitted(cuttable, kept, room)


def _fitted(cuttable: list[str], kept: list[str], room: int | None) -> str | None:
    """``cuttable`` then ``kept``, joined, in ``room`` cells where it is given: the parts
    of ``cuttable`` give way in their order, each cut with an ellipsis, or left out where
    fewer than two of its cells would stay."""
    shown: list[str | None] = list(cuttable)

    def joined() -> str:
        return SEPARATOR.join([part for part in shown if part] + kept)

    for index, part in enumerate(cuttable):
        over = cell_len(joined()) - room if room is not None else 0
        if over <= 0:
            break
        keep = cell_len(part) - over
        if keep >= 3:
            cut = Text(part)
            cut.truncate(keep - 1)
            shown[index] = cut.plain.rstrip(" ·") + "…"
        else:
            shown[index] = None
    return joined() or None


def health_badge(gpu: GpuSample) -> str | None:
    """``⚠ row remap pending: reset``, ``✖ Xid 79 fell off the bus``: the card's health
    verdict when it is not ok (docs/health.md); ``None`` when it is."""
    return badge(verdict(gpu.health))


def throttle_badge(gpu: GpuSample) -> str | None:
    """``⚠ power cap 3m``: the throttling clock event reasons and how long they have held
    (docs/activity.md); ``None`` when the card runs unthrottled."""
    labels = badge_labels(gpu.clock_event_mask)
    if not labels or gpu.lost:
        return None
    shown = f"⚠ {'+'.join(labels)}"
    held_s = gpu.throttled_for_s
    if held_s is None:  # since when is not known: the reasons alone
        return shown
    # To the minute (the border title repaints the whole card, so not every second); a
    # throttle that has held under a minute is "<1m", never "0m".
    return f"{shown} {'<1m' if held_s < 60 else duration_coarse(held_s)}"


ACTIVITY_FIGURES = (("SM", "sm_active_percent"), ("TC", "tensor_active_percent"),
                    ("DRAM", "dram_active_percent"))  # fmt: skip
"""What a Hopper card shows beside its utilisation: SM active, tensor active, DRAM."""


def activity_text(activity: Activity, *, tight: bool = False) -> Text | None:
    """``SM 72 TC 46 DRAM 58`` (``SM72 TC46 DR58`` when ``tight``): GPM's SM active, tensor
    active and DRAM bandwidth in percent; ``--`` until two samples gave figures; ``None``
    where GPM is absent (docs/activity.md)."""
    if not activity.gpm:
        return None
    parts: list[str | tuple[str, str]] = []
    for position, (name, key) in enumerate(ACTIVITY_FIGURES):
        value = getattr(activity, key)
        if position:
            parts.append(" ")
        parts.append((name[:2] if tight else f"{name} ", "dim"))
        parts.append(("--", "dim") if value is None else (f"{value:2.0f}", "cyan"))
    return assembled(*parts, tab_size=None)


def _state(gpu: GpuSample) -> str | None:
    if gpu.lost:
        return "LOST"
    if gpu.no_access:
        return "NO ACCESS"
    if gpu.sample_error:
        return "READ FAILED"
    if gpu.mig_mode_current:
        return f"MIG ×{len(gpu.mig_devices)}"
    return None if gpu.performance_state is None else f"P{gpu.performance_state}"


def _full_card_lines(view: CardView, width: int) -> list[Text]:
    gpu = view.gpu
    lines = [plain(gpu.name or "unknown GPU", style="bold", overflow="ellipsis", no_wrap=True)]
    if gpu.lost:
        lines.append(Text("GPU is lost: NVML cannot reach it.", style="bold red"))
        lines.append(Text("It may have fallen off the bus;", style="red"))
        lines.append(Text("check dmesg for Xid errors.", style="red"))
        return lines
    if gpu.no_access:
        lines.append(Text("No access: NVML refused this GPU", style="bold yellow"))
        lines.append(Text("(no permission: a device cgroup", style="yellow"))
        lines.append(Text("or container hides it from you).", style="yellow"))
        return lines
    util = gpu.utilization_gpu_percent
    util_text = NA if util is None else f"{util:3d}%"
    activity = activity_text(gpu.activity, tight=width < 44)
    extra = 0 if activity is None else activity.cell_len + 1
    bar_width = width - 4 - 1 - len(util_text) - extra
    style = view.util_style or level_style(util)
    shown = ("GPU ", bar(util, bar_width, style), " ", (util_text, style))
    lines.append(assembled(*shown, *(() if activity is None else (" ", activity))))
    lines.append(_sparkline(view.history, width))
    used_pct = percent_of(gpu.memory_used_bytes, gpu.memory_total_bytes)
    mem_text = memory_pair(gpu.memory_used_bytes, gpu.memory_total_bytes)
    mem_bar = bar(used_pct, max(width - 4 - 1 - len(mem_text), 4), level_style(used_pct, 80, 95))
    lines.append(assembled("MEM ", mem_bar, " ", mem_text))
    lines.append(_sensors(gpu))
    lines.append(_mig_line(view) if gpu.mig_mode_current else _clocks(gpu))
    return lines


_sparklines: dict[tuple[tuple[int | None, ...], int], Text] = {}
SPARKLINES_KEPT = 64


def _sparkline(history: tuple[int | None, ...], width: int) -> Text:
    """``sparkline(history, width)``, made once for each last ``width`` points: a card's
    points move once a bucket (every 2 s), its other lines every refresh. The same ``Text``
    is given again: the card's lines are never changed in place (they are copied first)."""
    key = (history[-width:] if width > 0 else (), width)
    line = _sparklines.get(key)
    if line is None:
        if len(_sparklines) >= SPARKLINES_KEPT:
            _sparklines.clear()
        line = _sparklines[key] = sparkline(history, width)
    return line


def _sensors(gpu: GpuSample) -> Text:
    temperature = NA if gpu.temperature_c is None else f"{gpu.temperature_c}°C"
    fan = NA if gpu.fan_percent is None else f"{gpu.fan_percent}%"
    return assembled(
        (temperature, temperature_style(gpu.temperature_c)),
        f"  {power_pair(gpu.power_w, gpu.power_limit_w)}",
        ("  fan ", "dim"),
        fan,
    )


def _mig_line(view: CardView) -> Text:
    """The card's MIG instances: ● marks a selected one, the highlighted one is reversed."""
    devices = view.gpu.mig_devices
    if not devices:
        return Text("MIG on, no instances")
    line = Text("MIG")
    for position, device in enumerate(devices):
        line.append(" ")
        selected = device.uuid is not None and device.uuid in view.mig_selected
        profile = clean((device.name or "?").rsplit(" ", 1)[-1])
        style = "reverse" if position == view.mig_cursor else ("bold" if selected else "")
        line.append(("●" if selected else "") + profile, style=style)
        sm = device.activity.sm_active_percent
        if device.activity.gpm:  # GPM's SM active of its GPU instance (docs/activity.md)
            line.append(" SM", style="dim")
            line.append("--" if sm is None else f"{sm:.0f}", style="dim" if sm is None else "cyan")
    return line


def _clocks(gpu: GpuSample) -> Text:
    sm = gpu.clocks.sm_mhz
    memory = gpu.clocks.memory_mhz
    return assembled(
        ("SM ", "dim"),
        NA if sm is None else f"{sm}",
        ("  MEM ", "dim"),
        NA if memory is None else f"{memory}",
        (" MHz", "dim"),
    )


def _cells(text: str, width: int) -> str:
    """``text`` in exactly ``width`` cells: padded, or cut with an ellipsis."""
    if cell_len(text) > width:
        text = set_cell_size(text, width - 1).rstrip() + "…"
    return set_cell_size(text, width)


def _compact_name(view: CardView) -> tuple[str, str]:
    """A one-line card's name, where its MIG line does not fit: the MIG instance m
    highlights (reversed, ● where selected), or how many are selected, as ``_mig_line``
    shows them on a full card."""
    devices = view.gpu.mig_devices
    if view.mig_cursor is not None and 0 <= view.mig_cursor < len(devices):
        device = devices[view.mig_cursor]
        selected = device.uuid is not None and device.uuid in view.mig_selected
        profile = clean((device.name or "?").rsplit(" ", 1)[-1])
        return ("●" if selected else "") + f"MIG {profile}", "bold reverse"
    chosen = sum(1 for device in devices if device.uuid in view.mig_selected)
    if chosen:
        return f"MIG ●{chosen} of {len(devices)}", "bold"
    return clean((view.gpu.name or "unknown").replace("NVIDIA ", "")), "bold"


HOLDER_CELLS_LEAST = 4
"""The fewest cells a one-line card gives who holds it: fewer, and it says nothing."""


def _holder(view: CardView) -> str | None:
    """Who holds the card, for a one-line card (which has no border to say it on): its
    claim's first words (``claimed by ana``, ``? may be claimed by bob``), else its Slurm
    job."""
    if view.claim:
        return view.claim.split(SEPARATOR, 1)[0]
    return view.slurm


def _compact_line(view: CardView, width: int) -> Text:
    gpu = view.gpu
    cursor = "▶" if view.highlighted else " "
    mark = "●" if view.selected else "○"
    name, style = _compact_name(view)
    flag = health_mark(verdict(gpu.health)) or ("⚠" if throttle_badge(gpu) is not None else "")
    shown = f"{_cells(name, 16)} {flag}" if flag else _cells(name, 18)
    # reversed (a MIG instance): the name alone, not its padding or the flag after it
    named = shown if style == "bold" else _cells(name, 16 if flag else 18).rstrip()
    line = Text.assemble(
        (cursor, "bold"), mark, f" {gpu.physical_index} ", (named, style), shown[len(named) :], " "
    )
    if gpu.lost:
        line.append("LOST: NVML cannot reach this GPU", style="bold red")
        return line
    if gpu.no_access:
        line.append("NO ACCESS: NVML refused this GPU", style="bold yellow")
        return line
    util = gpu.utilization_gpu_percent
    memory = f" {mib(gpu.memory_used_bytes):>6} / {mib(gpu.memory_total_bytes):<6}MiB"
    temperature = NA if gpu.temperature_c is None else f"{gpu.temperature_c}°C"
    power = NA if gpu.power_w is None else f"{gpu.power_w:.0f} W"
    tail = Text.assemble(
        (NA if util is None else f"{util:3d}%", view.util_style or level_style(util)),
        memory,
        " ",
        (f"{temperature:>5}", temperature_style(gpu.temperature_c)),
        f" {power:>6}",
    )
    activity = activity_text(gpu.activity, tight=True)
    # GPM's figures before the sparkline: at 80 columns the bar and sparkline give way
    if activity is not None and width - line.cell_len - tail.cell_len - activity.cell_len >= 3:
        util_cells = 4 if util is None or util < 1000 else len(f"{util}%")
        tail = Text.assemble(tail[:util_cells], " ", activity, tail[util_cells:])
    room = width - line.cell_len - tail.cell_len - 1
    spark_width = max(0, min(room // 2, 30))
    bar_width = max(room - spark_width - 1, 0)
    holder = _holder(view)
    in_spark = holder is not None and cell_len(holder) < spark_width
    if holder is not None and not in_spark and room > HOLDER_CELLS_LEAST:
        # in the bar's and the sparkline's place (a shorter bar would read as less in use):
        # both say again what the figures say
        line.append(_cells(holder, room - 1) + " ", style="bold")
    else:  # the bar as long as every other card's; who holds it in the sparkline's place
        line.append_text(bar(util, bar_width, view.util_style))
        line.append(" ")
        if holder is not None and in_spark:
            line.append(_cells(holder, spark_width), style="bold")
        else:
            line.append_text(_sparkline(view.history, spark_width))
    line.append_text(tail)
    line.truncate(width)
    return line
