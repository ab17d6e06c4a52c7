"""``H`` on a lab host's card: the same history screen as the one-host dashboard's
(gputop/tui/screens/card_history.py), fed by the host's agent instead of this machine's store
(docs/lab.md). The waiting happens in the screen's worker thread, never on the UI's."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text

from gputop.core.history.card_history import CardHistory
from gputop.tui.safe import plain
from gputop.tui.screens.card_history import render_card_history
from gputop.tui.screens.history_window import HistoryWindowScreen

ReadRemote = Callable[[int, float, float, int], CardHistory]
"""(physical index, window in seconds, now, columns) -> what the host answered."""


class RemoteCardHistoryScreen(HistoryWindowScreen):
    def __init__(self, host_name: str, physical_index: int, read: ReadRemote) -> None:
        super().__init__()
        self.host_name = host_name
        self.physical_index = physical_index
        self._read_remote = read

    def subject(self) -> Text:
        return Text.assemble(
            plain(self.host_name, style="bold"), (f"  GPU {self.physical_index}", "bold")
        )

    def read_history(self, window_s: float, now: float, columns: int) -> CardHistory:
        return self._read_remote(self.physical_index, window_s, now, columns)

    def render_history(self, found: object) -> Text:
        assert isinstance(found, CardHistory)
        return render_card_history(found)
