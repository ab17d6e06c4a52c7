"""The dashboard, driven by keys through Textual's Pilot on simulated GPUs."""

from __future__ import annotations

import getpass
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from helpers.dashboard import first_sample, make_app, plain_text, stays_true
from helpers.scenarios import minimal_gpu
from helpers.waiting import pilot_wait_for
from textual.pilot import Pilot

from gputop.tui.app import GputopApp
from gputop.tui.screens.confirm import ConfirmScreen
from gputop.tui.screens.help import HelpScreen
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.process_table import ProcessTable
from gputop.tui.widgets.torch_panel import TorchPanel

WriteScenario = Callable[..., str]
BIG = (160, 48)
SMALL = (80, 24)


def grid(app: GputopApp) -> GpuGrid:
    return app.query_one(GpuGrid)


def table(app: GputopApp) -> ProcessTable:
    return app.query_one(ProcessTable)


def card_text(app: GputopApp, physical_index: int) -> str:
    """The card's text inside its border."""
    return "\n".join(line.plain for line in grid(app).card_content(physical_index))


async def test_the_first_snapshot_fills_every_panel() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert len(grid(app).cards) == 4
        assert table(app).row_count == 2
        status = plain_text(app.query_one("#status"))
        assert "p3-8xlarge" in status and "418.67" in status and "CUDA 10.1" in status


async def test_eight_gpus_fit_160x48_without_scrolling() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert not app.has_class("-compact")
        for physical_index in range(8):
            region = grid(app).card_region(physical_index)
            assert region.height == 8 and region.bottom <= 48 - 12


async def test_80x24_uses_one_line_per_card() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=SMALL) as pilot:
        await first_sample(pilot)
        assert app.has_class("-compact")
        assert all(grid(app).card_region(i).height == 1 for i in range(8))
        assert table(app).region.height >= 8


async def test_one_gpu_uses_the_whole_width(scenario_file: WriteScenario) -> None:
    app = make_app(scenario_file([minimal_gpu()]))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert grid(app).card_region(0).width >= 150


async def test_arrows_and_jk_move_the_highlight_across_cards() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert grid(app).highlighted == 0
        await pilot.press("right", "j", "j")
        assert grid(app).highlighted == 3
        await pilot.press("k", "left", "k")
        assert grid(app).highlighted == 0


async def test_up_and_down_move_by_a_row_of_cards() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("down")
        assert grid(app).highlighted == 4
        await pilot.press("up")
        assert grid(app).highlighted == 0


async def test_space_selects_and_marks_cards() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("right", "right", "space", "left", "space")
        assert grid(app).selection == (1, 2)
        assert grid(app).card_state(1).selected and grid(app).card_state(2).selected
        assert not grid(app).card_state(0).selected
        await pilot.press("space")
        assert grid(app).selection == (2,)


async def test_with_nothing_selected_the_highlighted_card_is_the_selection() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("right", "right", "right")
        assert grid(app).selection == (3,)


async def test_a_selects_all_and_escape_clears() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("a")
        assert grid(app).selection == tuple(range(8))
        await pilot.press("escape")
        assert grid(app).explicitly_selected == frozenset()
        assert grid(app).selection == (0,)


async def test_a_launch_uses_selected_cards_in_physical_order() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("right", "right", "right", "space", "left", "left", "space")
        assert grid(app).selection == (1, 3)
        preview = plain_text(app.query_one("#torch-body"))
        assert "cuda:0 → GPU 1" in preview and "cuda:1 → GPU 3" in preview
        assert "CUDA_DEVICE_ORDER=" in preview and "PCI_BUS_ID" in preview


async def test_f_filters_processes_to_the_highlighted_card_and_back() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        everything = table(app).row_count
        await pilot.press("right", "f")
        assert table(app).only_gpu == 1
        assert 0 < table(app).row_count < everything
        await pilot.press("right")
        assert table(app).only_gpu == 2
        await pilot.press("f")
        assert table(app).row_count == everything


async def test_s_cycles_the_sort_and_S_reverses_it() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert table(app).sort_key.name == "GPU memory"
        await pilot.press("s")
        assert table(app).sort_key.name == "GPU"
        first_gpu = table(app).rows[0].text(0)
        await pilot.press("S")
        assert table(app).reverse is True
        assert table(app).rows[0].text(0) != first_gpu


async def test_the_process_table_sorts_by_gpu_memory_first() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        pids = [row.text(1) for row in table(app).rows]
        assert pids == ["4202277", "4327232"]


async def test_p_hides_and_shows_the_pytorch_view() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        torch = app.query_one(TorchPanel)
        assert torch.display
        await pilot.press("p")
        assert not torch.display
        await pilot.press("p")
        assert torch.display


async def test_p_in_a_small_terminal_swaps_the_table_for_the_pytorch_view() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=SMALL) as pilot:
        await first_sample(pilot)
        assert not app.query_one(TorchPanel).display
        await pilot.press("p")
        assert app.query_one(TorchPanel).display
        assert not table(app).display


async def test_question_mark_lists_every_key_and_escape_closes() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


@pytest.mark.parametrize("size", [BIG, SMALL])
async def test_the_help_says_how_to_close_it_and_each_key_it_names_does(
    size: tuple[int, int],
) -> None:
    from helpers.hostile import screen_text

    app = make_app("v100x4")
    async with app.run_test(size=size) as pilot:
        await first_sample(pilot)
        for key in ("escape", "q", "question_mark"):
            await pilot.press("question_mark")
            await pilot_wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help", 10)
            await pilot.pause()
            # on the window's border: seen without scrolling, even at 80x24
            assert "escape, q or ? closes this" in screen_text(app)
            await pilot.press(key)
            await pilot_wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), key, 10)
        assert app.is_running


async def test_q_quits() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_a_lost_gpu_is_shown_lost_and_the_others_live() -> None:
    app = make_app("faulty", at_s="60")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        lost = [i for i in grid(app).cards if grid(app).card_state(i).lost]
        assert len(lost) == 1
        assert len(grid(app).cards) - len(lost) == 2


async def test_an_unsupported_field_reads_na() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert "fan" in card_text(app, 0) and "N/A" in card_text(app, 0)


async def test_processes_from_another_namespace_say_so() -> None:
    app = make_app("faulty", at_s="3")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        commands = [row.text(-1) for row in table(app).rows]
        assert any("another PID namespace" in command for command in commands)


async def test_sampling_keeps_going_at_the_interval() -> None:
    app = make_app("v100x4", at_s="", interval_s=0.2)  # a live simulated clock
    async with app.run_test(size=BIG) as pilot:
        stamps: set[float] = set()
        for _ in range(100):  # polls up to 10 s: a loaded machine must not fail this
            await pilot.pause(0.1)
            if app.snapshot is not None:
                stamps.add(app.snapshot.timestamp)
            if len(stamps) >= 3:
                break
        assert len(stamps) >= 3


# -- signalling processes -------------------------------------------------------------------


@pytest.fixture
def own_process() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    child.kill()
    child.wait()


def scenario_with_pid(scenario_file: WriteScenario, pid: int) -> str:
    process = {"pid": pid, "used_memory_mib": 100, "type": "C"}
    return scenario_file([minimal_gpu(processes=[process])])


async def focus_first_process(app: GputopApp, pilot: Pilot[None]) -> None:
    await first_sample(pilot)
    table(app).focus()
    table(app).move_cursor(row=0)
    await pilot.pause()


async def test_t_asks_before_terminating_your_own_process_and_n_keeps_it(
    scenario_file: WriteScenario, own_process: subprocess.Popen[bytes], host_pid_namespace: None
) -> None:
    app = make_app(scenario_with_pid(scenario_file, own_process.pid), user=getpass.getuser())
    async with app.run_test(size=BIG) as pilot:
        await focus_first_process(app, pilot)
        await pilot.press("t")
        assert isinstance(app.screen, ConfirmScreen)
        assert "SIGTERM" in app.screen._question and str(own_process.pid) in app.screen._question
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmScreen)
        assert await stays_true(pilot, lambda: own_process.poll() is None, 0.2)


async def test_t_then_y_terminates_your_own_process(
    scenario_file: WriteScenario, own_process: subprocess.Popen[bytes], host_pid_namespace: None
) -> None:
    app = make_app(scenario_with_pid(scenario_file, own_process.pid), user=getpass.getuser())
    async with app.run_test(size=BIG) as pilot:
        await focus_first_process(app, pilot)
        await pilot.press("t", "y")
        assert not await stays_true(pilot, lambda: own_process.poll() is None, 5.0)
        assert own_process.returncode == -15


async def test_another_users_process_is_never_offered_for_signalling(
    scenario_file: WriteScenario, own_process: subprocess.Popen[bytes]
) -> None:
    app = make_app(scenario_with_pid(scenario_file, own_process.pid), user="someone-else")
    async with app.run_test(size=BIG) as pilot:
        await focus_first_process(app, pilot)
        await pilot.press("T")
        assert not isinstance(app.screen, ConfirmScreen)
        assert own_process.poll() is None


async def test_a_foreign_process_is_never_signalled(scenario_file: WriteScenario) -> None:
    unused_pid = 4_194_303  # the largest pid Linux hands out: no process here has it
    app = make_app(scenario_with_pid(scenario_file, unused_pid), user=getpass.getuser())
    async with app.run_test(size=BIG) as pilot:
        await focus_first_process(app, pilot)
        await pilot.press("t")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        (notice,) = [n.message for n in app._notifications]
        assert notice.startswith(f"Process {unused_pid} is not a process of this machine's view")
        assert "will not signal" in notice


async def test_readonly_turns_signalling_off(
    scenario_file: WriteScenario, own_process: subprocess.Popen[bytes]
) -> None:
    app = make_app(
        scenario_with_pid(scenario_file, own_process.pid), user=getpass.getuser(), readonly=True
    )
    async with app.run_test(size=BIG) as pilot:
        await focus_first_process(app, pilot)
        await pilot.press("t")
        assert not isinstance(app.screen, ConfirmScreen)
        assert own_process.poll() is None


async def test_tab_moves_focus_between_cards_and_processes() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert isinstance(app.focused, GpuGrid)
        await pilot.press("tab")
        assert isinstance(app.focused, ProcessTable)


async def test_a_gpu_nvml_refuses_is_shown_as_no_access_not_lost(
    scenario_file: Callable[..., str],
) -> None:
    refused = minimal_gpu(no_permission=["nvmlDeviceGetHandleByIndex"])
    other = minimal_gpu(
        uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000", pci_bus_id="00000000:08:00.0"
    )
    app = make_app(scenario_file([refused, other]))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert "No access" in card_text(app, 0)
        assert not grid(app).card_state(0).lost
        assert "No access" not in card_text(app, 1)
