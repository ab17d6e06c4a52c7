"""The bottom line: the keys that work now, as one widget painting one line.

Textual's ``Footer`` composes a widget per key and recomposes them all whenever the bindings
change (each focus change): dozens of widgets to style at start-up and on every ``tab``. This
bar reads the screen's active bindings (``Screen.active_bindings``, public) when Textual
signals that they changed (``Screen.bindings_updated_signal``), builds one ``Text``, and
repaints only if that text differs. A click on a key presses it, as Textual's footer does.
"""

from __future__ import annotations

from typing import NamedTuple

from rich.text import Text
from textual import events
from textual.app import RenderResult
from textual.screen import Screen
from textual.widget import Widget


class _Key(NamedTuple):
    key: str
    display: str
    description: str
    enabled: bool


class KeyBar(Widget):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
    }
    KeyBar > .key-bar--key {
        color: $footer-key-foreground;
        background: $footer-key-background;
        text-style: bold;
    }
    KeyBar > .key-bar--description {
        color: $footer-description-foreground;
    }
    KeyBar > .key-bar--separator {
        color: $foreground 20%;
    }
    """
    COMPONENT_CLASSES = {"key-bar--key", "key-bar--description", "key-bar--separator"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._keys: tuple[_Key, ...] = ()
        self._palette: _Key | None = None
        self._spans: list[tuple[int, int, _Key]] = []
        """Where each key was painted (start, end column), for clicks."""

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._read_bindings()

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            self._read_bindings()

    def _read_bindings(self) -> None:
        """The shown bindings, one per action, in binding order; repaint if they changed."""
        app = self.app
        keys: list[_Key] = []
        actions: set[str] = set()
        palette: _Key | None = None
        for _namespace, binding, enabled, _tooltip in self.screen.active_bindings.values():
            if app.ENABLE_COMMAND_PALETTE and binding.key == app.COMMAND_PALETTE_BINDING:
                palette = _Key(binding.key, app.get_key_display(binding), "palette", enabled)
                continue
            if not binding.show or binding.action in actions:
                continue
            actions.add(binding.action)
            keys.append(
                _Key(binding.key, app.get_key_display(binding), binding.description, enabled)
            )
        if (tuple(keys), palette) != (self._keys, self._palette):
            self._keys, self._palette = tuple(keys), palette
            self.refresh()

    @property
    def shown_keys(self) -> tuple[str, ...]:
        """The keys on the bar now, left to right (the palette key last)."""
        return tuple(k.key for k in self._keys) + ((self._palette.key,) if self._palette else ())

    def render(self) -> RenderResult:
        """The keys left to right, as many as fit; the palette at the right end if it fits
        after all of them (a narrow terminal keeps its keys rather than the palette)."""
        width = self.size.width
        key_style = self.get_component_rich_style("key-bar--key")
        description_style = self.get_component_rich_style("key-bar--description")
        line = Text(no_wrap=True, overflow="crop", end="")
        spans: list[tuple[int, int, _Key]] = []
        pieces = [(key, _piece(key, key_style, description_style)) for key in self._keys]
        for key, piece in pieces:
            if line.cell_len + piece.cell_len > width:
                break
            spans.append((line.cell_len, line.cell_len + piece.cell_len, key))
            line.append_text(piece)
        palette = self._palette
        if palette is not None and len(spans) == len(pieces):
            piece = _piece(palette, key_style, description_style)
            gap = width - line.cell_len - piece.cell_len - 1
            if gap >= 0:
                line.append(" " * gap)
                line.append("▏", self.get_component_rich_style("key-bar--separator"))
                spans.append((line.cell_len, line.cell_len + piece.cell_len, palette))
                line.append_text(piece)
        self._spans = spans
        return line

    def on_click(self, event: events.Click) -> None:
        for start, end, key in self._spans:
            if start <= event.x < end:
                event.stop()
                if key.enabled:
                    self.app.simulate_key(key.key)
                else:
                    self.app.bell()
                return


def _piece(key: _Key, key_style: object, description_style: object) -> Text:
    """`` q `` in the key's style, then `` Quit `` (dim where the binding is disabled)."""
    piece = Text.assemble(
        (f" {key.display} ", key_style),  # type: ignore[arg-type]
        (f" {key.description} " if key.description else "", description_style),  # type: ignore[arg-type]
    )
    if not key.enabled:
        piece.stylize("dim")
    return piece
