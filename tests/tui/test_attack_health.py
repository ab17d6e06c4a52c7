"""A lab host's hostile health readings, drawn as ``e``'s screen and ``H``'s section draw them
(one renderer): a time no clock shows (finite, but past year 9999) and a refused call's name
written as markup or with terminal escapes. Each is that host's datum's fault, caught where it
is decoded or drawn as plain text; neither screen raises (docs/security.md)."""

from __future__ import annotations

import io
from typing import Any

from helpers.hostile_hosts import agent_lines, good_document, replay
from rich.console import Console, RenderableType

from gputop.core.model import GpuHealth
from gputop.tui.screens.health import render_health_screen

HOSTILE_NAMES = ["[/]", "[bold red]loud[/bold red]", "[link=http://x]x[/link]\x1b[2Jgone"]


def drawn(renderable: RenderableType | list[Any]) -> str:
    console = Console(file=io.StringIO(), width=80, color_system=None)
    for part in renderable if isinstance(renderable, list) else [renderable]:
        console.print(part)
    return console.file.getvalue()  # type: ignore[attr-defined]


def host_health(health: dict[str, Any]) -> GpuHealth | None:
    """The first card's health as the lab reads it from a host that sent ``health``."""
    document = good_document()
    document["gpus"][0]["health"] = health
    status = replay("gpu1", agent_lines(document))
    if status.snapshot is None:  # the whole snapshot refused: nothing of it is drawn
        return None
    return status.snapshot.gpus[0].health


def test_an_xid_time_past_every_clock_is_not_drawn() -> None:
    for time_s in (1e300, -1e300, 1e20):
        health = host_health(
            {"xid_sources": ["nvml events"], "xid_events": [{"xid": 79, "time": time_s}]}
        )
        drawn(
            render_health_screen(health)
        )  # raised OverflowError before: the time reached the clock
        assert health is None  # the host's snapshot is refused, as one with a NaN time


def test_a_reading_time_past_every_clock_is_not_drawn() -> None:
    health = host_health({"read_at": 1e300})
    text = drawn(render_health_screen(health))  # raised OverflowError before
    assert health is None or health.read_at is None
    assert "read at" not in text


def test_a_refused_calls_name_is_plain_text() -> None:
    health = host_health({"refused": HOSTILE_NAMES})
    assert health is not None
    text = drawn(render_health_screen(health))
    # MarkupError before on the health screen: its names were read as markup
    assert "[bold red]loud[/bold red]" in text
    assert "[/]" in text
    assert "\x1b" not in text
