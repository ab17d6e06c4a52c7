"""Start-up: the first sample read before Textual starts, and the key bar (docs/speed.md)."""

from __future__ import annotations

import gc
import threading

import pytest
from helpers.dashboard import first_sample, make_app, stays_true
from helpers.waiting import pilot_wait_for
from textual.pilot import Pilot

import gputop.cli.dashboard as cli_dashboard
import gputop.tui.app as app_module
import gputop.tui.dashboard_base as dashboard_base
from gputop.cli.main import build_parser
from gputop.core.errors import GputopError
from gputop.core.model import Snapshot
from gputop.core.sampling.early import EarlySample
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.source import open_backend
from gputop.tui.app import GputopApp, SnapshotSampled
from gputop.tui.widgets.key_bar import KeyBar
from gputop.tui.widgets.process_table import ProcessTable

BIG = (160, 48)
ONE_SAMPLE_S = 3600.0
"""An interval no test outlasts: whatever the sampling thread reads meanwhile is the first
sample, however busy the machine (another test file runs beside this one)."""


def frozen_backend(scenario: str = "v100x4") -> NvmlBackend:
    return open_backend(scenario, environ={"GPUTOP_FAKE_TIME": "30"})


# -- the first sample ------------------------------------------------------------------------


def test_an_early_sample_is_the_backends_sample_and_is_taken_once() -> None:
    backend = frozen_backend()
    early = EarlySample.start(backend)
    early.wait()
    assert early.ready()
    snapshot = early.take()
    assert isinstance(snapshot, Snapshot) and len(snapshot.gpus) == 4
    with pytest.raises(RuntimeError, match="already taken"):
        early.take()


def test_an_early_sample_that_failed_raises_its_error_when_taken() -> None:
    class Failing:
        def sample(self) -> Snapshot:
            raise GputopError("NVML went away")

    early = EarlySample.start(Failing())  # type: ignore[arg-type]
    early.wait()
    with pytest.raises(GputopError, match="NVML went away"):
        early.take()


async def test_a_ready_first_sample_is_in_the_first_frame_and_not_posted_again() -> None:
    backend = frozen_backend()
    early = EarlySample.start(backend)
    early.wait()
    # No second sample in the test's time, however slow the machine: any posted is the first.
    app = GputopApp(
        backend, interval_s=ONE_SAMPLE_S, probes=False, user="alice", environ={}, first_sample=early
    )
    posted: list[SnapshotSampled] = []
    real_post = app.post_message

    def post(message: object) -> bool:
        if isinstance(message, SnapshotSampled):
            posted.append(message)
        return real_post(message)  # type: ignore[arg-type]

    app.post_message = post  # type: ignore[method-assign]
    async with app.run_test(size=BIG) as pilot:
        # on_mount showed it: nothing had to come from the sampling thread
        assert app.snapshot is not None
        assert app.query_one(ProcessTable).row_count == 2
        # the sampling thread reads the next one an interval later, not the same one again
        assert await stays_true(pilot, lambda: not posted, 0.5)


async def test_a_first_sample_still_being_read_is_waited_for_by_the_sampling_thread() -> None:
    backend = frozen_backend()
    release = threading.Event()
    sample = backend.sample
    calls: list[int] = []

    def slow_sample() -> Snapshot:
        calls.append(1)
        release.wait(10)
        return sample()

    backend.sample = slow_sample  # type: ignore[method-assign]
    early = EarlySample.start(backend)
    app = GputopApp(
        backend, interval_s=ONE_SAMPLE_S, probes=False, user="alice", environ={}, first_sample=early
    )
    async with app.run_test(size=BIG) as pilot:
        assert app.snapshot is None  # "waiting for the first sample"
        release.set()
        await first_sample(pilot)
        assert len(calls) == 1  # the sampling thread took the early sample over
    early.wait()


async def test_a_failed_first_sample_is_reported_as_a_failed_sample() -> None:
    backend = frozen_backend()
    sample = backend.sample
    failures = iter([GputopError("NVML went away")])

    def flaky_sample() -> Snapshot:
        for error in failures:
            raise error
        return sample()

    backend.sample = flaky_sample  # type: ignore[method-assign]
    early = EarlySample.start(backend)
    early.wait()
    app = GputopApp(backend, probes=False, user="alice", environ={}, first_sample=early)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)  # sampled again, and it works
        assert app.snapshot is not None


# -- the key bar ---------------------------------------------------------------------------------


def bar_text(app: GputopApp) -> str:
    bar = app.query_one(KeyBar)
    return str(bar.render())


async def shown_after(pilot: Pilot[None], keys: tuple[str, ...]) -> tuple[str, ...]:
    await pilot.press(*keys)
    await pilot.pause()
    return pilot.app.query_one(KeyBar).shown_keys


async def test_the_key_bar_shows_the_bindings_of_what_has_focus() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        bar = app.query_one(KeyBar)
        assert bar.shown_keys[:5] == ("q", "question_mark", "l", "space", "J")
        assert bar.shown_keys[-1] == "ctrl+p"
        text = bar_text(app)
        assert text.startswith(" q  Quit ") and text.endswith("▏ ^p  palette ")
        assert "Redraw" not in text  # show=False bindings stay off the bar
        assert "enter" not in bar.shown_keys
        # J focuses the jobs panel: its keys join the app's, and leave with the focus
        keys = await shown_after(pilot, ("J",))
        assert {"enter", "K", "q"} <= set(keys)
        assert "Stop job" in bar_text(app)
        keys = await shown_after(pilot, ("J",))
        assert "enter" not in keys and "K" not in keys


async def test_a_click_on_a_key_presses_it() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        text = bar_text(app)
        column = text.index("Keys")
        await pilot.click(KeyBar, offset=(column, 0))
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"


@pytest.mark.parametrize("columns", [30, 40, 80])
async def test_a_narrow_terminal_keeps_its_keys_rather_than_the_palette(columns: int) -> None:
    app = make_app("v100x4")
    async with app.run_test(size=(columns, 24)) as pilot:
        await first_sample(pilot)
        text = bar_text(app)
        assert len(text) <= columns
        assert text.startswith(" q  Quit ")
        assert "palette" not in text  # not every key fits: the keys come first
        if columns >= 80:  # the launch and the jobs are among the keys that fit
            assert " l  Launch " in text and " J  Jobs " in text


async def test_the_palette_is_at_the_right_end_when_every_key_fits() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=(200, 24)) as pilot:
        await first_sample(pilot)
        text = bar_text(app)
        assert len(text) == 200 and text.endswith("▏ ^p  palette ")


async def test_a_disabled_binding_is_shown_dim() -> None:
    app = make_app("v100x4", readonly=True)
    async with app.run_test(size=(240, 24)) as pilot:
        await first_sample(pilot)
        bar = app.query_one(KeyBar)
        rendered = bar.render()
        start = str(rendered).index(" t ")
        styles = [span.style for span in rendered.spans if span.start <= start < span.end]  # type: ignore[attr-defined]
        assert any("dim" in str(style) for style in styles)


# -- the garbage collector -----------------------------------------------------------------


async def test_the_collector_is_settled_after_start_up_only_where_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settled: list[str] = []
    monkeypatch.setattr(dashboard_base, "SETTLE_AFTER_S", 0.05)
    monkeypatch.setattr(dashboard_base, "settle_collector", lambda: settled.append("settled"))
    for tune in (False, True):
        app = GputopApp(
            frozen_backend(),
            interval_s=ONE_SAMPLE_S,
            probes=False,
            user="alice",
            environ={},
            tune_collector=tune,
        )
        async with app.run_test(size=BIG) as pilot:
            await first_sample(pilot)
            if tune:
                await pilot_wait_for(pilot, lambda: settled, "the collector settled")
            else:
                assert await stays_true(pilot, lambda: not settled, 0.3)
    assert settled == ["settled"]  # once, for the app that asked


def test_the_gputop_command_asks_its_dashboard_to_settle_the_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """...and starts it with the collector off (its objects live as long as it does; the
    settling turns it on), and on again however the dashboard ends."""
    made: list[dict[str, object]] = []
    collecting: list[bool] = []

    class Recorded:
        fatal_error = None
        return_code = 0

        def __init__(self, backend: object, **options: object) -> None:
            made.append(options)

        def run(self) -> None:
            collecting.append(gc.isenabled())
            if len(made) > 1:
                raise KeyboardInterrupt

    monkeypatch.setattr(app_module, "GputopApp", Recorded)
    monkeypatch.setattr(cli_dashboard, "require_terminal", lambda: None)
    args = build_parser().parse_args(["--fake", "v100x4", "--interval", "1", "--readonly"])
    assert gc.isenabled()
    assert cli_dashboard.run(args) == 0
    assert made and made[0]["tune_collector"] is True
    assert collecting == [False] and gc.isenabled()
    with pytest.raises(KeyboardInterrupt):
        cli_dashboard.run(args)
    assert collecting == [False, False] and gc.isenabled()
