"""The PyTorch view: which physical card each ``cuda:N`` is, and what a launch would pin.

The mapping follows the CUDA driver's rules (gputop.core.visibility). The driver probe and
the torch probe run in worker threads, once per environment, and never delay a frame. The
first driver probe, with both variables unset, gives the driver's own fastest-first order;
until it answers, or where it cannot, that order is gputop's estimate and says so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Set
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from gputop.core.errors import GputopError
from gputop.core.model import Snapshot
from gputop.core.probes import DriverProbe, compare_with_rules, order_note
from gputop.core.probes.driver_mapping import driver_visibility, rules_error
from gputop.core.records import mutable
from gputop.core.safe_text import clean
from gputop.core.visibility import Visibility, pin_environment, resolve_visibility
from gputop.tui.safe import plain
from gputop.tui.workers import ReportsWorkerFailures

CVD = "CUDA_VISIBLE_DEVICES"
ORDER = "CUDA_DEVICE_ORDER"
PREVIEW_WIDTH = 48
"""The narrowest the panel's text gets (its min-width, less border, padding and gutter)."""


@mutable
class ProbeFinished(Message):
    kind: str
    result: Any


class TorchPanel(ReportsWorkerFailures, VerticalScroll):
    DEFAULT_CSS = """
    TorchPanel > Static { width: 100%; }
    """
    ALLOW_MAXIMIZE = True
    """The palette's Maximize gives it the screen, as the other panels (a scroll container
    is not maximized by default, and its explanations run past its panel)."""

    def __init__(
        self,
        *,
        environ: Mapping[str, str] | None,
        python: str | None,
        probes: bool,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        env = os.environ if environ is None else environ
        self.cuda_visible_devices = env.get(CVD)
        self.cuda_device_order = env.get(ORDER)
        self._slurm_environ = {k: v for k, v in env.items() if k.startswith("SLURM_")}
        """Inside a Slurm job: its cards, for the allocation's explanation (docs/slurm.md)."""
        if self.cuda_visible_devices is not None:
            self._slurm_environ[CVD] = self.cuda_visible_devices
        self.python = python
        self.probes_enabled = probes
        self._snapshot: Snapshot | None = None
        self._identity: tuple[Any, ...] | None = None
        self._visibility: Visibility | None = None
        self._selection: tuple[int | str, ...] = ()
        self._driver: Any = None
        self._default_order: Any = None
        self._torch: Any = None
        self._driver_probe = DriverProbe()
        self._rendered: Any = None

    def compose(self) -> ComposeResult:
        yield Static(id="torch-body")

    def on_mount(self) -> None:
        self.border_title = "PyTorch view"

    def show(self, snapshot: Snapshot) -> None:
        if self._snapshot is None and self.probes_enabled:
            # The probes start Python processes: on a small machine they would compete
            # with the first frame, so they wait until it is on the screen.
            self.call_after_refresh(self._run_probes)
        identity = (
            self._default_order,
            snapshot.driver_version,
            tuple(
                (g.uuid, g.pci_bus_id, g.name, g.lost, g.no_access, len(g.mig_devices))
                for g in snapshot.gpus
            ),
        )
        self._snapshot = snapshot
        if identity != self._identity:
            self._identity = identity
            self._visibility = resolve_visibility(
                snapshot.gpus,
                snapshot.driver_version,
                self.cuda_visible_devices,
                self.cuda_device_order,
                driver_order=self._driver_order(),
            )
            self._repaint()

    def _driver_order(self) -> tuple[str, ...] | None:
        default = self._default_order
        return default.uuids if default is not None and default.status == "ok" else None

    def set_selection(self, cards: tuple[int | str, ...]) -> None:
        """Whole GPUs by physical index, MIG instances by ``MIG-`` UUID."""
        if cards != self._selection:
            self._selection = cards
            self._repaint()

    @work(thread=True, group="probes", exit_on_error=False)
    def _run_probes(self) -> None:
        default = self._driver_probe.default_order()
        self.post_message(ProbeFinished("driver-order", default))
        driver = self._driver_probe.probe(self.cuda_visible_devices, self.cuda_device_order)
        self.post_message(ProbeFinished("driver", driver))
        from gputop.core.probes.torch_probe import probe_torch  # after the first frame

        torch = probe_torch(self.python, self.cuda_visible_devices, self.cuda_device_order)
        self.post_message(ProbeFinished("torch", torch))

    def on_probe_finished(self, message: ProbeFinished) -> None:
        if message.kind == "driver-order":
            self._default_order = message.result
            if self._snapshot is not None:
                self.show(self._snapshot)
            return
        if message.kind == "driver":
            self._driver = message.result
        else:
            self._torch = message.result
        self._repaint()

    # -- rendering -----------------------------------------------------------------------

    def _repaint(self) -> None:
        if self._snapshot is None or self._visibility is None:
            return
        state = (self._visibility, self._selection, self._default_order, self._driver, self._torch)
        if state == self._rendered:
            return
        self._rendered = state
        self.query_one("#torch-body", Static).update(self._render_body())

    def _render_body(self) -> RenderableType:
        visibility = self._visibility
        assert visibility is not None and self._snapshot is not None
        parts: list[RenderableType] = [
            Text.assemble(
                (f"{CVD}=", "dim"),
                _shown(self.cuda_visible_devices),
                ("  ", ""),
                (f"{ORDER}=", "dim"),
                _shown(self.cuda_device_order),
            )
        ]
        shown = self._driver_seen(visibility) or visibility
        lost = {gpu.physical_index for gpu in self._snapshot.gpus if gpu.lost}
        parts.append(_mapping_table(shown, lost))
        parts.extend(_lost_warnings(shown, lost))
        for warning in visibility.warnings:
            parts.append(Text(f"⚠ {clean(warning.message)}", style="yellow"))
        parts.extend(self._allocation_lines(visibility))
        parts.append(self._probe_lines(visibility))
        parts.append(self._launch_preview())
        return _RenderedOnce(Group(*parts))

    def _allocation_lines(self, visibility: Visibility) -> list[Text]:
        """Inside a Slurm job: Slurm's cards → CUDA_VISIBLE_DEVICES → cuda:N."""
        assert self._snapshot is not None
        if not any(name.startswith("SLURM_") for name in self._slurm_environ):
            return []  # no Slurm job without its variables (nor the module that reads them)
        from gputop.core.slurm.allocation import describe_allocation, explain_allocation

        view = explain_allocation(self._slurm_environ, len(self._snapshot.gpus), visibility)
        if view is None:
            return []
        return [
            Text(f"⚠ {clean(line.removeprefix('warning: '))}", style="yellow")
            if line.startswith("warning: ")
            else Text(clean(line), style="cyan")
            for line in describe_allocation(view)
        ]

    def _driver_seen(self, visibility: Visibility) -> Visibility | None:
        """The driver's enumeration where its probe answered: that is the mapping shown, the
        rules' list only where it could not answer (gputop.core.probes.driver_mapping)."""
        if self._driver is None or self._snapshot is None:
            return None
        return driver_visibility(visibility, self._driver, self._snapshot.gpus)

    def _probe_lines(self, visibility: Visibility) -> Text:
        text = Text()
        source, order_message = order_note(
            visibility, self._default_order if self.probes_enabled else None
        )
        if source == "estimate" and not self.probes_enabled:
            order_message = order_message.replace("the driver was not asked", "probes off")
        elif source == "estimate" and self._default_order is None:
            order_message = order_message.replace("the driver was not asked", "checking…")
        doubtful = source == "estimate" and not visibility.order_certain
        text.append(f"{order_message}\n", style="yellow" if doubtful else "dim")
        if not self.probes_enabled:
            text.append("Probes off.", style="dim")
            return text
        if self._driver is None:
            text.append("Driver: checking…", style="dim")
        else:
            verdict, message = compare_with_rules(visibility, self._driver)
            style = {"verified": "green", "disagrees": "bold red"}.get(verdict, "dim")
            driver_seen = self._driver_seen(visibility)
            wrong = None if driver_seen is None else rules_error(visibility, driver_seen)
            message = wrong or message
            text.append(f"Driver: {clean(message)}", style=style)
        text.append("\n")
        if self._torch is None:
            text.append("torch: checking…", style="dim")
        else:
            style = "green" if self._torch.status == "ok" else "dim"
            text.append(f"torch: {clean(self._torch.message)}", style=style)
        return text

    def _launch_preview(self) -> RenderableType:
        snapshot = self._snapshot
        assert snapshot is not None
        if not self._selection:
            return Text("Launch preview: no card selected.", style="dim")
        try:
            pinning = pin_environment(
                snapshot.gpus, self._selection, driver_version=snapshot.driver_version
            )
        except GputopError as error:
            return Text(f"Launch preview: {clean(str(error))}", style="red")
        from gputop.core.mig_targets import target_label  # a card selected: not at start

        lines = Text("Launch on ", style="bold")
        lines.append(
            ", ".join(target_label(snapshot.gpus, t) for t in self._selection), style="bold"
        )
        lines.append(":\n")
        for key, value in pinning.env.items():
            lines.append(f"  {key}=", style="dim")
            entries = clean(value).split(",")
            if len(key) + len(clean(value)) + 3 > PREVIEW_WIDTH:
                # One UUID a line (the value is still one, comma-separated): a UUID cut in
                # the middle by the wrap cannot be read, nor copied.
                lines.append("\n")
                lines.append(",\n".join(f"    {entry}" for entry in entries))
                lines.append("\n")
            else:
                lines.append(f"{clean(value)}\n")
        lines.append(
            "\n".join(  # one mapping a line: "cuda:3 → GPU" and "3" never split
                f"  cuda:{d.logical_index} → "
                + target_label(snapshot.gpus, d.mig_uuid or d.physical_index)
                for d in pinning.devices
            )
        )
        for warning in pinning.warnings:
            lines.append(f"\n⚠ {warning}", style="yellow")
        return lines


class _RenderedOnce:
    """``renderable``, rendered once for each width it is asked at: Textual renders an
    auto-height widget's content once to count its lines and again to paint them, and the
    view's table is most of its cost (about 18M instructions before the first frame). The
    height asked for is not in the key: a table, a group and a text do not read it."""

    def __init__(self, renderable: RenderableType) -> None:
        self._renderable = renderable
        self._key: tuple[Any, ...] | None = None
        self._segments: list[Any] = []

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        key = (
            options.size,
            options.legacy_windows,
            options.min_width,
            options.max_width,
            options.is_terminal,
            options.encoding,
            options.justify,
            options.overflow,
            options.no_wrap,
            options.highlight,
            options.markup,
        )
        if key != self._key:
            self._segments = list(console.render(self._renderable, options))
            self._key = key
        return self._segments

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self._renderable)


def _shown(value: str | None) -> Text:
    if value is None:
        return Text("(unset)", style="italic dim")
    return Text(
        repr(value) if value == "" or value != value.strip() else clean(value), style="bold"
    )


def _lost_warnings(visibility: Visibility, lost: Set[int]) -> list[Text]:
    """A lost GPU still listed: CUDA cannot use it, and a program started now will likely
    not number it, so every cuda:N after it would move."""
    return [
        Text(
            f"⚠ cuda:{device.logical_index} is GPU {device.physical_index}, which is LOST "
            "(NVML cannot reach it): a program cannot use it, and one started now may not "
            "count it, numbering the cards after it one lower.",
            style="bold red",
        )
        for device in visibility.devices
        if device.physical_index in lost
    ]


def _mapping_table(visibility: Visibility, lost: Set[int] = frozenset()) -> RenderableType:
    if not visibility.devices:
        return Text("No CUDA device is visible with this setting.", style="bold red")
    table = Table(box=None, padding=(0, 1), show_header=True, header_style="dim")
    # cuda:N and its GPU are what the view is for: when the panel is narrow the name and the
    # uuid give way (Rich squeezed "cuda:0" to "cud…", then dropped both columns).
    widest = max(len(f"cuda:{device.logical_index}") for device in visibility.devices)
    table.add_column("cuda", no_wrap=True, min_width=widest)
    table.add_column("GPU", justify="right", no_wrap=True, min_width=3)
    table.add_column("name", overflow="ellipsis", no_wrap=True)
    table.add_column("uuid", overflow="ellipsis", no_wrap=True)
    for device in visibility.devices:
        uuid = (device.mig_uuid or device.uuid or "?")[:12]
        table.add_row(  # Text cells: a str cell of a Rich table is read as markup
            Text(f"cuda:{device.logical_index}"),
            Text(str(device.physical_index)),
            plain((device.name or "?").replace("NVIDIA ", ""))
            if device.physical_index not in lost
            else Text.assemble(
                ("LOST ", "bold red"), plain((device.name or "?").replace("NVIDIA ", ""))
            ),
            plain(uuid),
        )
    return table
