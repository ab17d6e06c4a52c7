"""A screen's frame timer that sleeps while paused, through Textual's internals. Part of
textual_compat (its ``__init__`` says why these live here).

Each screen paints from a timer (``Screen._update_timer``: ``Screen._on_timer_update`` at most
``1 / MAX_FPS`` apart, 60 a second) that a refresh resumes and each paint pauses. Textual's
``Timer._run`` sleeps until its next tick *before* it looks whether it is paused: after every
frame it wakes once more, 17 ms later, only to find itself paused. On a dashboard that draws
once a second that is a second wake-up of the main thread a second, and on a virtual machine a
wake-up from a sleep costs 0.1-0.2 ms of CPU (docs/speed.md). ``install_quiet_frame_timer``
makes that one timer wait for its resume first and sleep only when the last frame is less than
an interval ago: the frames come when they came (at once on a resume an interval or more after
the last one, else an interval after it), and a paused timer never wakes. Every other timer
runs Textual's own loop. tests/tui/test_textual_compat.py checks both.
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual import _time
from textual.screen import Screen
from textual.timer import EventTargetGone, Timer

_textual_run = Timer._run
"""Textual's own loop, which every other timer runs."""


def install_quiet_frame_timer() -> None:
    """Make every screen's frame timer sleep while it is paused (idempotent)."""
    if Timer._run is not _run:
        Timer._run = _run  # type: ignore[method-assign]


def is_frame_timer(timer: Timer) -> bool:
    """Whether ``timer`` is a screen's frame timer (its callback ``Screen._on_timer_update``)."""
    callback: Any = timer._callback
    return getattr(callback, "__func__", None) is Screen._on_timer_update and timer._repeat is None


async def _run(self: Timer) -> None:
    if not is_frame_timer(self):
        await _textual_run(self)
        return
    interval = self._interval
    active: asyncio.Event = self._active  # made here, in the loop's thread, as Textual's loop does
    last: float | None = None
    count = 0
    while True:
        await active.wait()
        if self._reset:  # as Textual's: the next frame an interval from now
            self._reset = False
            last = _time.get_time()
            continue
        if last is not None:
            wait = last + interval - _time.get_time()
            if wait > 0:
                await _time.sleep(wait)
                if not active.is_set():  # paused meanwhile: wait for the resume again
                    continue
        last = _time.get_time()
        count += 1
        try:
            await self._tick(next_timer=last, count=count)
        except EventTargetGone:
            break
