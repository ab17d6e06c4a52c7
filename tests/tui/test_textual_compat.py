"""What gputop assumes of Textual's internals, one test per assumption
(gputop/tui/textual_compat/). A Textual upgrade that breaks one fails here, by name."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import random
import re
import selectors
import signal
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from helpers import REPO
from helpers.dashboard import first_sample, make_app
from helpers.pty_run import run_in_pty
from helpers.waiting import pilot_wait_for, wait_for
from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual import _styles_cache, events
from textual import timer as textual_timer
from textual._compositor import Compositor
from textual.app import App, ComposeResult
from textual.cache import FIFOCache
from textual.color import Color
from textual.css.query import NoMatches
from textual.filter import DimFilter
from textual.geometry import Region
from textual.pilot import Pilot
from textual.screen import UPDATE_PERIOD, Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input, Static

from gputop.tui.screen_diff import _parse
from gputop.tui.textual_compat import (
    HANGUP_RETURN_CODE,
    ExceptionHook,
    InOrderInput,
    LinuxDriver,
    QuietInput,
    app_closing,
    frame_timer,
    install_lean_strips,
    install_lean_styles,
    install_quiet_frame_timer,
    textual_handles_exception,
    unless_closing,
    visual_strips,
)
from gputop.tui.textual_compat.paint import (
    _STRIP_CACHES,
    _STRIP_SLOTS,
    _lean_styles_render,
    _render_partial_update,
    _textual_partial_update,
    _textual_strip_init,
    _textual_styles_render,
    _textual_styles_render_line,
)
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.process_table import ProcessTable

SIZE = (50, 12)

# -- the terminal driver ---------------------------------------------------------------------


def test_textual_chooses_its_linux_driver_where_no_other_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import textual.constants

    monkeypatch.setattr(textual.constants, "DRIVER", None)  # TEXTUAL_DRIVER unset
    assert App().get_driver_class() is LinuxDriver


RECORDING_APP = textwrap.dedent(
    """
    import os, sys
    from textual.app import App
    from textual.widgets import Static
    from gputop.tui.textual_compat import LinuxDriver, terminal_fd

    written = open(sys.argv[1], "w", encoding="utf-8", newline="")
    size_seen = open(sys.argv[2], "w", encoding="utf-8")

    class RecordingDriver(LinuxDriver):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            size = os.get_terminal_size(terminal_fd(self))
            size_seen.write(f"{size.columns}x{size.lines}")
            size_seen.close()

        def write(self, data):
            written.write(data)
            written.flush()
            super().write(data)

    class Small(App):
        def get_driver_class(self):
            return RecordingDriver

        def compose(self):
            yield Static("gputop checks what Textual writes")

        def on_mount(self):
            self.call_after_refresh(self.exit)

    Small().run()
    """
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes, str]:
    """A small app on a real pty whose driver records every ``write``: what the terminal
    got, what went through ``write``, and the size the driver's descriptor reported."""
    directory = tmp_path_factory.mktemp("driver")
    written, size = directory / "written", directory / "size"
    env = {key: value for key, value in os.environ.items() if key != "TEXTUAL_DRIVER"}
    env["TERM"] = "xterm-256color"
    run = run_in_pty([sys.executable, "-c", RECORDING_APP, str(written), str(size)], env, size=SIZE)
    assert run.exit_code == 0, bytes(run.output).decode(errors="replace")
    return bytes(run.output), written.read_bytes(), size.read_text()


def test_everything_textual_sends_the_terminal_goes_through_the_drivers_write(
    recorded: tuple[bytes, bytes, str],
) -> None:
    terminal_got, through_write, _ = recorded
    assert b"gputop checks what Textual writes" in through_write
    # The pty's line discipline turns each newline into CR LF (ONLCR), nothing else.
    assert terminal_got.replace(b"\r\n", b"\n") == through_write


def test_the_drivers_descriptor_is_the_terminal_whose_size_is_the_screens(
    recorded: tuple[bytes, bytes, str],
) -> None:
    assert recorded[2] == f"{SIZE[0]}x{SIZE[1]}"


# -- the app on its way out ------------------------------------------------------------------


class Closing(App[None]):
    """Records ``app_closing`` while it runs and while its widgets are taken down."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, bool] = {}

    def compose(self) -> ComposeResult:
        yield Watcher()


class Watcher(Static):
    def on_unmount(self) -> None:
        closing = self.app
        assert isinstance(closing, Closing)
        closing.seen["unmounting"] = app_closing(closing)


async def test_an_app_is_closing_once_exit_is_called_and_while_textual_takes_it_down() -> None:
    app = Closing()
    async with app.run_test(size=SIZE) as pilot:
        app.seen["running"] = app_closing(app)
        app.exit()
        app.seen["exit called"] = app_closing(app)
        await pilot.pause()
    assert app.seen == {"running": False, "exit called": True, "unmounting": True}


async def test_a_message_handled_while_the_app_closes_finds_its_widgets_gone() -> None:
    """Why gputop asks ``app_closing``: a late handler's query fails with NoMatches."""
    found: list[str] = []

    class Late(App[None]):
        def compose(self) -> ComposeResult:
            yield Static(id="panel")

        def on_unmount(self) -> None:
            assert app_closing(self)
            try:
                self.query_one("#panel")
            except NoMatches:
                found.append("gone")

    app = Late()
    async with app.run_test(size=SIZE):
        app.exit()
    assert found == ["gone"]


async def test_a_drawing_handler_drops_its_message_only_while_the_app_closes() -> None:
    class Drawing(App[None]):
        @unless_closing
        def draw(self, message: str) -> None:
            self.query_one("#nowhere")

    app = Drawing()
    async with app.run_test(size=SIZE):
        with pytest.raises(NoMatches):  # while it runs, a widget missing is an error
            app.draw("sample")
        app.exit()
        app.draw("sample")  # dropped: the app is on its way out


# -- an exception that reaches Textual -------------------------------------------------------


class Failing(ExceptionHook, App[None]):
    def __init__(self, hand_on: Exception | None) -> None:
        super().__init__()
        self.hand_on = hand_on
        self.reached: list[Exception] = []

    def compose(self) -> ComposeResult:
        yield Static("failing")

    def on_key(self) -> None:
        raise KeyError("a bug in a handler")

    def exception_reached_textual(self, error: Exception) -> None:
        self.reached.append(error)
        textual_handles_exception(self, self.hand_on or error)


class RendersAsNothing(Exception):
    def __rich__(self) -> Text:
        return Text()


async def test_an_exception_escaping_a_handler_reaches_the_hook_and_textual_exits_with_1() -> None:
    handed = RendersAsNothing("handed on")
    app = Failing(handed)
    with pytest.raises(RendersAsNothing):  # run_test raises what Textual was handed
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("x")
            await pilot.pause()
    assert [repr(error) for error in app.reached] == [repr(KeyError("a bug in a handler"))]
    assert app.return_code == 1
    assert not app.is_running


# -- a widget's text as Textual renders it ---------------------------------------------------


class Lines(Widget):
    DEFAULT_CSS = "Lines { height: 4; color: red; background: blue; }"

    TEXT = Text.assemble(("bold ", "bold"), "plain\n", ("second", "green"), "\n\nlast")

    def render(self) -> Text:
        return self.TEXT


async def test_visual_strips_are_the_strips_textual_renders_for_a_widgets_text() -> None:
    class Holder(App[None]):
        def compose(self) -> ComposeResult:
            yield Lines()

    app = Holder()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        widget = app.query_one(Lines)
        width, height = widget.size
        ours = visual_strips(widget, Lines.TEXT, width, height, widget.visual_style)
        textuals = [widget.render_line(y) for y in range(height)]
        assert [strip.text for strip in ours] == [strip.text for strip in textuals]
        assert [list(strip) for strip in ours] == [list(strip) for strip in textuals]


PRIVATE_ATTRIBUTE = re.compile(r"\.(_[a-z]\w*)\b")
DEFINED_PRIVATE = re.compile(
    r"self\.(_\w+)\s*(?::[^=\n]*)?=[^=]|def (_\w+)|^\s*(_\w+)\s*[:=]|^class (_\w+)"
    r"|import .*\b(_\w+)",
    re.MULTILINE,
)
INTERNAL_MODULES = re.compile(r"textual\.(drivers|visual)\b|textual(\.\w+)*\._\w+")


def test_no_module_of_the_dashboard_but_the_compat_one_reaches_into_textual() -> None:
    """No module of gputop/tui or gputop/cli outside textual_compat/ imports Textual's internal
    modules, or reads an underscore name that gputop does not define itself (one of
    Textual's: ``app._exit``), or overrides Textual's ``_handle_exception``."""
    package = REPO / "gputop"
    sources = {
        path: path.read_text(encoding="utf-8")
        for folder in ("tui", "cli")
        for path in (package / folder).rglob("*.py")
    }
    ours = {
        name
        for source in sources.values()
        for match in DEFINED_PRIVATE.finditer(source)
        for name in match.groups()
        if name
    }
    reaching = sorted(
        f"{path.relative_to(package)}: {sorted(found)}"
        for path, source in sources.items()
        if path.parent.name != "textual_compat"
        and (
            found := {name for name in PRIVATE_ATTRIBUTE.findall(source) if name not in ours}
            | set(m.group(0) for m in INTERNAL_MODULES.finditer(source))
            | ({"_handle_exception"} if "def _handle_exception" in source else set())
        )
    )
    assert reaching == []


# -- a partial screen update -----------------------------------------------------------------


Cells = dict[tuple[int, int], tuple[str, str]]


def _screen(*updates: str, on: Cells | None = None) -> Cells:
    """What a terminal shows after ``updates``, on what it showed (``on``): each cell's
    character and colours, read as the screen diff reads Textual's writes (cursor moves,
    SGR sequences and text; tests/unit/test_screen_diff.py checks that reading on pyte)."""
    cells = dict(on or {})
    for update in updates:
        parsed = _parse(update)
        assert parsed is not None
        for y, x, text, sgr in parsed[0]:
            for char in text:
                cells[y, x] = (char, sgr)
                if cell_len(char) == 2:
                    cells[y, x + 1] = ("", sgr)
                x += max(cell_len(char), 1)
    return cells


def _full_text(app: App) -> str:
    return app.screen._compositor.render_full_update().render_segments(app.console)


def _partial_text(app: App, regions: list[Region], update: object) -> str:
    compositor = app.screen._compositor
    compositor._dirty_regions.update(regions)
    chops = update(compositor)  # type: ignore[operator]
    assert chops is not None
    return chops.render_segments(app.console)


def _region_sets(width: int, height: int, seed: int) -> list[list[Region]]:
    """Changed regions as a dashboard makes them, and as none does: lines of one widget,
    single cells on widget edges, rectangles across several widgets, the whole screen."""
    rng = random.Random(seed)
    sets: list[list[Region]] = [
        [Region(0, 0, width, height)],
        [Region(0, y, width, 1) for y in range(0, height, 3)],
        [Region(x, y, 1, 1) for x in (0, width // 2, width - 1) for y in (0, height - 1)],
    ]
    for _ in range(40):
        regions = []
        for _ in range(rng.randint(1, 6)):
            x, y = rng.randrange(width), rng.randrange(height)
            regions.append(
                Region(x, y, rng.randint(1, width - x), rng.randint(1, min(4, height - y)))
            )
        sets.append(regions)
    return sets


def _assert_partial_updates_show_what_textuals_show(app: App, seed: int) -> int:
    """On a terminal showing the screen, each update for random changed regions leaves it
    as Textual's own update does, cell for cell, and writes no more than Textual's."""
    shown = _screen(_full_text(app))
    compared = 0
    for regions in _region_sets(*app.size, seed):
        ours = _partial_text(app, regions, _render_partial_update)
        theirs = _partial_text(app, regions, _textual_partial_update)
        assert _screen(ours, on=shown) == _screen(theirs, on=shown), regions
        written = _screen(ours)
        width, height = app.size
        spans = Compositor._regions_to_spans(regions)
        assert all(
            (y, x) in written
            for y, x1, x2 in spans
            if y < height
            for x in range(x1, min(x2, width))
        ), regions  # every cell of every changed span
        assert len(ours) <= len(theirs)
        compared += 1
    return compared


@pytest.mark.parametrize("scroll", [False, True])
async def test_a_partial_update_shows_what_textuals_own_shows(scroll: bool) -> None:
    """``install_partial_updates``: for any changed regions, the update that renders only the
    widgets and lines it writes, and writes only the changed spans, leaves the terminal as
    Textual's own update does, on the dashboard as sampled, with its process table
    scrolled, and with a dialog over it; after a new sample, the update of the regions the
    widgets marked shows the new screen as a repaint from nothing does."""
    app = make_app("dgx-h100")
    assert Compositor.render_partial_update is _render_partial_update  # the dashboard's
    async with app.run_test(size=(200, 50)) as pilot:
        await first_sample(pilot)
        if scroll:
            table = app.query_one(ProcessTable)
            table.focus()
            for _ in range(30):
                await pilot.press("down")
            await pilot.press("right", "right")
        await pilot.pause()
        assert _assert_partial_updates_show_what_textuals_show(app, seed=1) > 40
        before = _full_text(app)
        nvml = app.backend.nvml
        nvml.set_time(nvml.now() + 1.0)
        snapshot = app.backend.sample()
        app.history.add(snapshot)
        app.query_one(GpuGrid).show(snapshot, app.history, compact=False)
        app.query_one(ProcessTable).show(snapshot)
        compositor = app.screen._compositor
        compositor.update_widgets(set(app.screen.walk_children()))
        marked = list(compositor._dirty_regions)
        assert marked
        update = _partial_text(app, marked, _render_partial_update)
        assert _screen(before, update) == _screen(_full_text(app))
        assert _assert_partial_updates_show_what_textuals_show(app, seed=2) > 40
        await pilot.press("question_mark")  # the help dialog, over the dashboard
        await pilot.pause()
        assert app.screen is not app.screen_stack[0]
        assert _assert_partial_updates_show_what_textuals_show(app, seed=3) > 40


# -- a widget's lines styled once a paint ----------------------------------------------------


def _styled_lines(widget: Widget, lean: bool) -> list[list[Segment]]:
    """Every line of ``widget`` as its styles cache renders it, lean or as Textual's own."""
    cache = _styles_cache.StylesCache
    saved = cache.render, cache.render_line
    if not lean:
        cache.render = _textual_styles_render  # type: ignore[method-assign]
        cache.render_line = _textual_styles_render_line  # type: ignore[method-assign]
    try:
        widget._styles_cache.clear()
        width, height = widget.region.size
        return [list(strip) for strip in widget.render_lines(Region(0, 0, width, height))]
    finally:
        cache.render, cache.render_line = saved  # type: ignore[method-assign]
        widget._styles_cache.clear()


class _StyledApp(App[None]):
    """Widgets with each of what a line's styles can hold: borders on some edges, padding,
    an outline, a tint, opacity, text opacity, a hatch."""

    CSS = """
    Static { height: 4; }
    #border { border: round red; padding: 0 2; }
    #left { border-left: heavy green; border-bottom: solid blue; padding: 1 0 0 1; }
    #right { border-right: double yellow; background: $panel; }
    #outline { outline: solid red; }
    #tint { tint: red 30%; border: round white; }
    #opacity { opacity: 60%; border: round white; }
    #text { text-opacity: 50%; border: round white; }
    #hatch { hatch: cross red; padding: 1; }
    #scroll { height: 3; border: round white; overflow-y: scroll; }
    """

    def compose(self) -> ComposeResult:
        for name in ("border", "left", "right", "outline", "tint", "opacity", "text", "hatch"):
            yield Static(f"{name} [b]bold[/b] 世界 " * 3, id=name)
        yield Static("\n".join(f"line {n}" for n in range(9)), id="scroll")


async def test_lean_styles_render_every_line_as_textuals_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``install_lean_styles``: every line of every widget of the dashboard (its process
    table focused and scrolled, and not) and of widgets with each kind of style is the same
    strip as Textual's own ``render_line`` makes it; most of the dashboard's lines are drawn
    the lean way, not handed to Textual's."""
    import gputop.tui.textual_compat.paint as compat

    handed = [0]

    def counted(*args: Any) -> Strip:
        handed[0] += 1
        return _textual_styles_render_line(*args)

    monkeypatch.setattr(compat, "_textual_styles_render_line", counted)
    install_lean_styles()
    install_lean_styles()  # idempotent
    assert _styles_cache.StylesCache.render is _lean_styles_render
    compared = 0
    app = make_app("dgx-h100")
    async with app.run_test(size=(200, 50)) as pilot:
        await first_sample(pilot)
        for focus in (False, True):
            if focus:
                app.query_one(ProcessTable).focus()
                await pilot.press("down", "down", "right")
                await pilot.pause()
            lines = handed[0] = 0
            for widget in app.screen.walk_children(Widget):
                if widget.region.area:
                    lean = _styled_lines(widget, True)
                    assert lean == _styled_lines(widget, False), widget
                    compared += 1
                    lines += len(lean)
            assert handed[0] < lines / 4  # the borders' top and bottom rows, a few others
    styled = _StyledApp()
    async with styled.run_test(size=(60, 40)) as pilot:
        await pilot.pause()
        for widget in styled.screen.walk_children(Widget):
            if widget.region.area:
                assert _styled_lines(widget, True) == _styled_lines(widget, False), widget
                compared += 1
    assert compared > 20


# -- strips made without their caches --------------------------------------------------------


def _operations(strip: Strip) -> list[object]:
    """What each of Textual's cached strip operations gives, twice (the second from cache)."""
    filt = DimFilter()
    background = Color(10, 20, 30)
    out: list[object] = []
    for _ in range(2):
        out += [
            strip.crop(2, 9).text,
            [s.text for s in strip.divide([3, 7, 12])],
            list(strip.apply_style(RichStyle(bold=True))),
            list(strip.apply_filter(filt, background)),
            list(strip.adjust_cell_length(20, RichStyle(italic=True))),
            list(strip.crop_extend(1, 18, RichStyle(dim=True))),
            list(strip.apply_offsets(1, 2)),
            strip.render(Console()),
            strip.cell_length,
        ]
    return out


def test_textuals_strip_makes_the_caches_lean_strips_make_when_first_used() -> None:
    # the slots install_lean_strips turns lazy are those Textual's __init__ fills
    made = Strip.__new__(Strip)
    _textual_strip_init(made, [Segment("abc")])
    assert all(type(getattr(made, name)) is FIFOCache for name in _STRIP_CACHES)
    assert set(_STRIP_CACHES) <= set(Strip.__slots__)


def test_a_lean_strip_makes_a_cache_only_when_used_and_gives_what_textuals_strip_gives() -> None:
    install_lean_strips()
    install_lean_strips()  # idempotent
    segments = [Segment("hello ", RichStyle(color="red")), Segment("wide 世界 text", None)]
    lean = Strip(segments)
    assert not any(_has_slot(lean, name) for name in _STRIP_CACHES)  # none made yet
    lean.crop(1, 4)
    assert [name for name in _STRIP_CACHES if _has_slot(lean, name)] == ["_crop_cache"]
    assert lean.crop(1, 4) is lean.crop(1, 4)  # and it caches as Textual's does
    textuals = Strip.__new__(Strip)
    _textual_strip_init(textuals, segments)
    assert _operations(Strip(segments)) == _operations(textuals)


def _has_slot(strip: Strip, name: str) -> bool:
    """Whether the slot behind ``name`` holds a cache, read without making one."""
    try:
        _STRIP_SLOTS[name].__get__(strip, Strip)
    except AttributeError:
        return False
    return True


# -- the input thread that sleeps until there is input ---------------------------------------


@pytest.fixture
async def quiet_input(
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[tuple[QuietInput, int, list[object]]]:
    """A ``QuietInput`` reading a pipe instead of the terminal, its messages collected (a
    driver is made inside an event loop; its thread needs none)."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTSTP, signal.SIGCONT)}
    driver = QuietInput(App())
    read_fd, write_fd = os.pipe()
    driver.fileno = read_fd
    received: list[object] = []
    monkeypatch.setattr(driver, "process_message", received.append)
    try:
        yield driver, write_fd, received
    finally:
        driver.exit_event.set()
        os.close(write_fd)
        os.close(read_fd)
        for number, handler in handlers.items():
            signal.signal(number, handler)


def _start_input(driver: QuietInput) -> threading.Thread:
    thread = threading.Thread(target=driver.run_input_thread, daemon=True)
    thread.start()
    return thread


def _keys(received: list[object]) -> list[str]:
    return [message.key for message in received if isinstance(message, events.Key)]


async def test_the_quiet_input_thread_reads_keys_and_a_lone_escape(
    quiet_input: tuple[QuietInput, int, list[object]],
) -> None:
    driver, write_fd, received = quiet_input
    thread = _start_input(driver)
    os.write(write_fd, b"q")
    wait_for(lambda: _keys(received) == ["q"], "the key q")
    os.write(write_fd, b"\x1b")  # a lone escape: the parser's timeout makes it a key
    wait_for(lambda: _keys(received) == ["q", "escape"], "the escape key")
    driver.exit_event.set()
    thread.join(5)
    assert not thread.is_alive()


async def test_the_quiet_input_thread_waits_without_a_timeout_only_while_nothing_is_pending(
    quiet_input: tuple[QuietInput, int, list[object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    driver, write_fd, received = quiet_input
    timeouts: list[float | None] = []
    select = selectors.SelectSelector.select

    def recorded(self: selectors.SelectSelector, timeout: float | None = None) -> Any:
        timeouts.append(timeout)
        return select(self, timeout)

    monkeypatch.setattr(selectors.SelectSelector, "select", recorded)
    thread = _start_input(driver)
    wait_for(lambda: timeouts, "the first wait")
    assert timeouts == [None]  # idle: no wake-up ten times a second
    os.write(write_fd, b"\x1b")
    wait_for(lambda: _keys(received) == ["escape"], "the escape key")
    assert 0.1 in timeouts  # while the escape was pending, Textual's own timeout
    # setting the exit event wakes the thread at once: it does not wait for input
    driver.exit_event.set()
    thread.join(5)
    assert not thread.is_alive()


async def test_the_quiet_input_thread_starts_again_after_a_suspend(
    quiet_input: tuple[QuietInput, int, list[object]],
) -> None:
    """``ctrl+z``: Textual sets the exit event, joins the thread, clears the event, and on
    resuming starts a new thread (``LinuxDriver.disable_input``, ``start_application_mode``)."""
    driver, write_fd, received = quiet_input
    for key in (b"a", b"b"):
        thread = _start_input(driver)
        os.write(write_fd, key)
        wait_for(lambda key=key: key.decode() in _keys(received), f"the key {key!r}")
        driver.exit_event.set()
        thread.join(5)
        assert not thread.is_alive()
        driver.exit_event.clear()
    assert _keys(received) == ["a", "b"]


async def test_the_quiet_input_thread_ends_at_the_end_of_file_and_asks_the_app_to_exit() -> None:
    """A terminal that hung up gives the end of file at once, every time: Textual's loop read
    it for ever (docs/faults.md, "The terminal goes away")."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTSTP, signal.SIGCONT)}
    app = App()
    driver = QuietInput(app)
    read_fd, write_fd = os.pipe()
    driver.fileno = read_fd
    try:
        thread = _start_input(driver)
        os.write(write_fd, b"q")
        os.close(write_fd)  # what was typed is read, then the end of file
        thread.join(5)
        assert not thread.is_alive()
        for _ in range(100):  # the exit is asked for on this loop, from the thread
            if app.return_code is not None:
                break
            await asyncio.sleep(0.01)
        assert app.return_code == HANGUP_RETURN_CODE
    finally:
        os.close(read_fd)
        for number, handler in handlers.items():
            signal.signal(number, handler)


async def test_the_quiet_input_driver_resumes_on_sigcont_only_after_a_suspend(
    quiet_input: tuple[QuietInput, int, list[object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    driver, _write_fd, _received = quiet_input
    resumed: list[bool] = []
    monkeypatch.setattr(driver, "resume_application_mode", lambda: resumed.append(True))
    driver._sigcont_application()  # a stray SIGCONT: from the hangup of a terminal, or anyone
    assert resumed == []
    driver._must_signal_resume = True  # as a SIGTSTP leaves it (LinuxDriver._sigtstp_application)
    driver._sigcont_application()
    assert resumed == [True]


async def test_the_quiet_input_threads_pipe_is_never_inherited_and_is_closed_with_it() -> None:
    """Jobs launched from the dashboard must not inherit the pipe; a driver gone closes it."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTSTP, signal.SIGCONT)}
    driver = QuietInput(App())
    for number, handler in handlers.items():  # the driver's own handlers hold it
        signal.signal(number, handler)
    fds = (driver._wake_read, driver._wake_write)
    assert all(not os.get_inheritable(fd) for fd in fds)
    del driver
    gc.collect()
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


# -- ctrl+c ------------------------------------------------------------------------------------


def test_textual_binds_ctrl_c_to_the_help_quit_action_quit_hint_replaces() -> None:
    """``QuitHint.action_help_quit`` is what ctrl+c runs: Textual's system binding."""
    from gputop.tui.textual_compat import QuitHint

    (binding,) = [b for b in App.BINDINGS if getattr(b, "key", None) == "ctrl+c"]
    assert binding.action == "help_quit"  # type: ignore[union-attr]
    assert callable(App.action_help_quit) and callable(QuitHint.action_help_quit)


async def test_a_dialog_hides_the_apps_ctrl_c_and_a_priority_one_that_skips_lets_a_field_copy() -> (
    None
):
    """What ``QUIT_HINT_BINDING`` relies on: a modal screen hides the app's bindings
    (Textual's ctrl+c did nothing in a dialog), its priority bindings are still heard there,
    and one whose action raises ``SkipAction`` lets the focused ``Input`` copy."""
    from textual.actions import SkipAction
    from textual.binding import Binding
    from textual.screen import ModalScreen

    ran: list[str] = []

    class Dialog(ModalScreen[None]):
        def compose(self) -> ComposeResult:
            yield Input("typed", id="field", select_on_focus=False)

    class Plain(App[None]):
        def action_help_quit(self) -> None:
            ran.append("hint")

    class Priority(Plain):
        BINDINGS = [Binding("ctrl+c", "help_quit", priority=True)]

        def action_help_quit(self) -> None:
            ran.append("priority")
            raise SkipAction()

    cases = ((Plain, False, [], ""), (Priority, False, ["priority"], ""))
    for app_class, selected, heard, copied in (*cases, (Priority, True, ["priority"], "typed")):
        ran.clear()
        app = app_class()
        async with app.run_test() as pilot:
            await app.push_screen(Dialog())
            field = app.screen.query_one(Input)
            field.focus()
            if selected:
                field.select_all()
            await pilot.press("ctrl+c")
            await pilot.pause()
            assert ran == heard, app_class
            assert app.clipboard == copied  # with a selection, the field copied after the skip


# -- editing keys in the order they were typed -----------------------------------------------

BURST = [
    ("a", "a"),
    ("b", "b"),
    ("c", "c"),
    ("backspace", "\x7f"),
    ("d", "d"),
    ("left", None),
    ("x", "x"),
    ("ctrl+u", "\x15"),
    ("q", "q"),
]
"""Keys read from the terminal at once (an ssh link delivers them together), as the driver
posts them: typed, they give "abd", then "abxd", then "d" (ctrl+u), then "qd"."""


@pytest.mark.parametrize(("field", "shown"), [(Input, "x"), (InOrderInput, "qd")])
async def test_editing_keys_read_together_act_in_the_order_typed(
    field: type[Input], shown: str
) -> None:
    """Textual's ``Input`` runs a binding (backspace, left, ctrl+u) only once its key has
    bubbled round, after the keys read with it: every letter lands first ("abcdxq"), then
    backspace, left and ctrl+u act on them, leaving "x". ``InOrderInput`` runs them as they
    arrive. If Textual's own comes out
    right here, ``InOrderInput`` can go (gputop/tui/textual_compat/)."""

    class Typed(App[None]):
        def compose(self) -> ComposeResult:
            yield field(id="typed")

    app = Typed()
    async with app.run_test() as pilot:
        await pilot.pause()
        for key, character in BURST:
            app.post_message(events.Key(key, character))
        await pilot.pause()
        await pilot.pause()
        assert app.query_one("#typed", Input).value == shown


# -- the frame timer -------------------------------------------------------------------------


class _Frames(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("frames", id="frames")


@pytest.fixture
def frames(monkeypatch: pytest.MonkeyPatch) -> tuple[list[float], list[float]]:
    """(when each frame was painted, each sleep a screen's frame timer took), recorded: the
    sleeps of Textual's own loop (``textual.timer.sleep``) and of gputop's alike, so a test
    fails if the frame timer is Textual's again."""
    painted: list[float] = []
    slept: list[float] = []
    textual_update = Screen._on_timer_update

    def on_timer_update(screen: Screen[Any]) -> None:
        painted.append(time.monotonic())
        textual_update(screen)

    def recording(real: Any) -> Any:
        async def sleep(seconds: float) -> None:
            task = asyncio.current_task()
            if task is not None and task.get_name() == "screen_update":
                slept.append(seconds)
            await real(seconds)

        return sleep

    monkeypatch.setattr(Screen, "_on_timer_update", on_timer_update)
    monkeypatch.setattr(frame_timer._time, "sleep", recording(frame_timer._time.sleep))
    monkeypatch.setattr(textual_timer, "sleep", recording(textual_timer.sleep))
    install_quiet_frame_timer()
    return painted, slept


async def _an_interval_after_a_frame(pilot: Pilot[None], painted: list[float]) -> None:
    """Wait for a frame, then for a frame's interval after the last one."""
    await pilot_wait_for(pilot, lambda: painted, "the first frame")
    last = painted[-1]
    await pilot_wait_for(pilot, lambda: time.monotonic() > last + UPDATE_PERIOD, "an interval")


@contextlib.asynccontextmanager
async def _frames_running(painted: list[float]) -> AsyncIterator[tuple[_Frames, Pilot[None]]]:
    """The frames app running, an interval after its first frame."""
    app = _Frames()
    async with app.run_test(size=SIZE) as pilot:
        await _an_interval_after_a_frame(pilot, painted)
        yield app, pilot


async def test_the_frame_timer_paints_on_a_refresh_and_never_wakes_while_paused(
    frames: tuple[list[float], list[float]],
) -> None:
    painted, slept = frames
    async with _frames_running(painted) as (app, pilot):
        assert frame_timer.is_frame_timer(app.screen._update_timer)
        other = app.set_interval(0.01, lambda: None)
        assert not frame_timer.is_frame_timer(other)  # every other timer: Textual's loop
        other.stop()
        for _ in range(3):
            await _an_interval_after_a_frame(pilot, painted)
            del slept[:]
            count = len(painted)
            app.query_one("#frames", Static).update(f"frame {count}")
            await pilot_wait_for(pilot, lambda count=count: len(painted) > count, "the frame")
            await pilot.pause()
            # Painted at once on the refresh (an interval after the last frame), and then
            # waiting for the next refresh: Textual's loop sleeps an interval here, to wake
            # and find itself paused.
            assert slept == []
        assert app.screen.query_one("#frames", Static).content == "frame " + str(count)


async def test_frames_asked_for_within_an_interval_come_an_interval_apart(
    frames: tuple[list[float], list[float]],
) -> None:
    painted, slept = frames
    async with _frames_running(painted) as (app, pilot):
        static = app.query_one("#frames", Static)
        count = len(painted)
        static.update("one")
        await pilot_wait_for(pilot, lambda: len(painted) > count, "the first frame")
        static.update("two")  # at once: within an interval of the frame
        await pilot_wait_for(pilot, lambda: len(painted) > count + 1, "the second frame")
        gap = painted[count + 1] - painted[count]
        assert gap >= UPDATE_PERIOD - 0.001, f"frames {gap * 1000:.1f} ms apart"
        assert slept and slept[0] > 0
