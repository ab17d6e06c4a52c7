"""The cards of every GPU, the highlight that moves across them, and the selection.

With nothing selected, the highlighted card is the selection: a person who just moves to a
free card and presses the launch key should get that card. On a card in MIG mode, ``m``
moves the highlight through its MIG instances (then back to the whole card); a highlighted
instance is what space selects and what a launch pins (by its MIG UUID).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

from textual.binding import Binding
from textual.containers import Grid
from textual.message import Message

from gputop.core.claims.view import card_claim_text
from gputop.core.model import GpuSample, MigDevice, Snapshot
from gputop.core.sampling.history import UtilizationHistory
from gputop.tui.render import sticky_level_style
from gputop.tui.widgets.gpu_card import CardView, GpuCard

MIN_CARD_WIDTH = 38


class GpuGrid(Grid, can_focus=True):
    BINDINGS = [
        Binding("left,k", "move(-1)", "Prev card", show=False),
        Binding("right,j", "move(1)", "Next card", show=False),
        Binding("up", "move_row(-1)", "Card above", show=False),
        Binding("down", "move_row(1)", "Card below", show=False),
        Binding("m", "next_instance", "Next MIG instance", show=False),
    ]

    class SelectionChanged(Message):
        """The highlight or the selection moved; ``cards`` is what a launch would use:
        physical indices of whole GPUs and ``MIG-`` UUIDs of MIG instances."""

        def __init__(self, highlighted: int | None, cards: tuple[int | str, ...]) -> None:
            super().__init__()
            self.highlighted = highlighted
            self.cards = cards

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._physical: list[int] = []
        self._position = 0
        self._selected: set[int | str] = set()
        self._mig_cursor: int | None = None
        """Position of the highlighted MIG instance in the highlighted card's list."""
        self._snapshot: Snapshot | None = None
        self._history: UtilizationHistory | None = None
        self._util_styles: dict[int, str] = {}
        """Each card's utilisation colour as last shown: it changes with hysteresis."""
        self.compact = False
        self.slurm_labels: dict[int, str] = {}

    # -- state -------------------------------------------------------------------------

    @property
    def highlighted(self) -> int | None:
        """The physical index of the highlighted card."""
        return self._physical[self._position] if self._physical else None

    @property
    def highlighted_target(self) -> int | str | None:
        """The highlighted card's physical index, or its highlighted MIG instance's UUID."""
        device = self._cursor_device()
        if device is not None and device.uuid:
            return device.uuid
        return self.highlighted

    @property
    def selection(self) -> tuple[int | str, ...]:
        """Selected cards and MIG instances in physical order, or the highlighted one."""
        if self._selected:
            return tuple(sorted(self._selected, key=self._place))
        target = self.highlighted_target
        return () if target is None else (target,)

    @property
    def explicitly_selected(self) -> frozenset[int | str]:
        return frozenset(self._selected)

    def toggle_highlighted(self) -> None:
        target = self.highlighted_target
        if target is None:
            return
        self._selected ^= {target}
        self._changed()

    def action_next_instance(self) -> None:
        """On a card in MIG mode: highlight its next MIG instance, then the card again."""
        gpu = self._highlighted_gpu()
        if gpu is None or not gpu.mig_devices:
            return
        following = 0 if self._mig_cursor is None else self._mig_cursor + 1
        self._mig_cursor = following if following < len(gpu.mig_devices) else None
        self._changed()

    def _highlighted_gpu(self) -> GpuSample | None:
        if self._snapshot is None or self.highlighted is None:
            return None
        return next((g for g in self._snapshot.gpus if g.physical_index == self.highlighted), None)

    def _cursor_device(self) -> MigDevice | None:
        gpu = self._highlighted_gpu()
        if gpu is None or self._mig_cursor is None or self._mig_cursor >= len(gpu.mig_devices):
            return None
        return gpu.mig_devices[self._mig_cursor]

    def _place(self, target: int | str) -> tuple[int, int]:
        """Sort key: a whole GPU at its index, a MIG instance after it, in NVML's order."""
        if isinstance(target, int):
            return (target, -1)
        for gpu in self._snapshot.gpus if self._snapshot is not None else ():
            for device in gpu.mig_devices:
                if device.uuid == target:
                    return (gpu.physical_index, device.mig_index)
        return (1 << 30, 0)

    def select_all(self) -> None:
        self._selected = set(self._physical)
        self._changed()

    def clear_selection(self) -> None:
        self._selected.clear()
        self._changed()

    def action_move(self, step: int) -> None:
        if self._physical:
            self._position = (self._position + step) % len(self._physical)
            self._mig_cursor = None
            self._changed()

    def action_move_row(self, step: int) -> None:
        if self._physical:
            columns = 1 if self.compact else self._columns()
            target = self._position + step * columns
            if 0 <= target < len(self._physical):
                self._position = target
                self._mig_cursor = None
                self._changed()

    # -- data ----------------------------------------------------------------------------

    def show_slurm(self, labels: Mapping[int, str]) -> None:
        """Which Slurm job holds each card (docs/slurm.md): shown in the cards' subtitles."""
        if dict(labels) != dict(self.slurm_labels):
            self.slurm_labels = dict(labels)
            if self._snapshot is not None:
                self._paint()

    def show(self, snapshot: Snapshot, history: UtilizationHistory, compact: bool) -> None:
        physical = [gpu.physical_index for gpu in snapshot.gpus]
        if physical != self._physical:
            self._rebuild(physical)
        self._snapshot, self._history = snapshot, history
        if compact != self.compact:
            self.compact = compact
            self._layout()
        self._paint()

    def _rebuild(self, physical: list[int]) -> None:
        first = not self._physical
        self._physical = physical
        self._position = min(self._position, max(len(physical) - 1, 0))
        self._selected = {t for t in self._selected if isinstance(t, str) or t in physical}
        self._mig_cursor = None
        self.remove_children()
        self.mount_all(GpuCard(index) for index in physical)
        self._layout()
        if first:
            self.call_after_refresh(self._changed)

    def _paint(self) -> None:
        if self._snapshot is None or self._history is None:
            return
        cards = {card.physical_index: card for card in self.query(GpuCard)}
        for position, gpu in enumerate(self._snapshot.gpus):
            card = cards.get(gpu.physical_index)
            if card is None:
                continue
            highlighted = position == self._position
            util_style = sticky_level_style(
                gpu.utilization_gpu_percent, self._util_styles.get(gpu.physical_index)
            )
            self._util_styles[gpu.physical_index] = util_style
            card.show(
                CardView(
                    gpu=gpu,
                    history=self._history.series(gpu.uuid, gpu.physical_index),
                    highlighted=highlighted,
                    selected=gpu.physical_index in self._selected,
                    compact=self.compact,
                    mig_cursor=self._mig_cursor if highlighted else None,
                    mig_selected=frozenset(
                        d.uuid for d in gpu.mig_devices if d.uuid and d.uuid in self._selected
                    ),
                    util_style=util_style,
                    slurm=self.slurm_labels.get(gpu.physical_index),
                    claim=card_claim_text(gpu, time.time()),
                )
            )

    def _changed(self) -> None:
        self._paint()
        self.post_message(self.SelectionChanged(self.highlighted, self.selection))

    # -- layout --------------------------------------------------------------------------

    def on_resize(self) -> None:
        self._layout()

    def _columns(self) -> int:
        count = max(len(self._physical), 1)
        width = self.size.width or self.app.size.width
        fit = max(1, width // MIN_CARD_WIDTH)
        if count <= fit:
            return count
        rows = math.ceil(count / fit)
        return math.ceil(count / rows)

    def _layout(self) -> None:
        count = max(len(self._physical), 1)
        if self.compact:
            self.styles.grid_size_columns = 1
            self.styles.grid_rows = "1"
            self.styles.height = count
            return
        columns = self._columns()
        rows = math.ceil(count / columns)
        self.styles.grid_size_columns = columns
        self.styles.grid_rows = "8"
        self.styles.height = rows * 8
