"""Each GPU process's own CUDA view, read from the environment of real processes.

The cards are simulated (a scenario naming the real pids); the processes and their
environments are real, started here with the variables a DDP rank gets.
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable

import pytest
from helpers.cuda_view import UUIDS, four_cards, snapshot_processes

from gputop.core.model import GpuSample, ProcessCuda
from gputop.core.process_detail import describe_process
from gputop.core.remote.protocol import snapshot_from_json
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.process_env import (
    ENVIRON_LIMIT_BYTES,
    CudaEnvironment,
    CudaViews,
    parse_environ,
    read_cuda_environment,
)
from gputop.core.snapshot_json import snapshot_to_json


def process_cuda(
    environment: CudaEnvironment, gpus: list[GpuSample], driver_version: str | None, index: int
) -> ProcessCuda:
    """One process's view on card ``index``, as the sampler works it out."""
    return CudaViews().views_for(gpus, driver_version)(environment, index)


def test_each_rank_reports_its_own_cuda_devices_rank_and_world_size(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    pinned = f"{UUIDS[3]},{UUIDS[1]}"
    common = {"CUDA_VISIBLE_DEVICES": pinned, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    common |= {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "41234"}
    rank0 = start_process(RANK="0", LOCAL_RANK="0", **common)
    rank1 = start_process(RANK="1", LOCAL_RANK="1", **common)
    scenario = scenario_file(four_cards({3: [rank0.pid], 1: [rank1.pid]}))
    processes = snapshot_processes(capsys, scenario)
    assert processes[rank0.pid]["cuda"] == {
        "visible_devices": pinned,
        "device_order": "PCI_BUS_ID",
        "rank": 0,
        "local_rank": 0,
        "world_size": 2,
        "master_addr": "127.0.0.1",
        "master_port": 41234,
        "run_id": None,
        "devices": [3, 1],
        "mismatch": False,
        "devices_from": "rules",
        "unknown": None,
    }
    assert processes[rank1.pid]["cuda"]["rank"] == 1
    assert processes[rank1.pid]["cuda"]["mismatch"] is False


def test_a_process_on_a_card_its_own_list_excludes_is_flagged(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # It asked for GPU 3 by index without PCI_BUS_ID; NVML shows it on GPU 0.
    stray = start_process(CUDA_VISIBLE_DEVICES=UUIDS[3])
    scenario = scenario_file(four_cards({0: [stray.pid]}))
    cuda = snapshot_processes(capsys, scenario)[stray.pid]["cuda"]
    assert cuda["devices"] == [3] and cuda["mismatch"] is True


def test_a_process_without_the_variables_sees_every_card_and_is_no_mismatch(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = start_process()
    scenario = scenario_file(four_cards({2: [plain.pid]}))
    cuda = snapshot_processes(capsys, scenario)[plain.pid]["cuda"]
    assert cuda["visible_devices"] is None and cuda["rank"] is None
    assert sorted(cuda["devices"]) == [0, 1, 2, 3] and cuda["mismatch"] is False


def test_a_process_whose_environment_cannot_be_read_is_unknown(
    scenario_file: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = scenario_file(four_cards({0: [4200001]}))  # no such process here
    assert snapshot_processes(capsys, scenario)[4200001]["cuda"] is None
    assert read_cuda_environment(4200001) is None


def test_numbers_out_of_range_are_not_available_and_a_cut_entry_is_dropped() -> None:
    parsed = parse_environ(b"RANK=-1\0WORLD_SIZE=0\0LOCAL_RANK=\xd9\xa3\0MASTER_PORT=99999\0")
    assert parsed.get("LOCAL_RANK") == "٣" and parsed.get("MASTER_PORT") == "99999"
    cuda = process_cuda(parsed, [], None, 0)
    assert (cuda.rank, cuda.local_rank, cuda.world_size, cuda.master_port) == (None,) * 4
    cut = parse_environ(b"RANK=1\0CUDA_VISIBLE_DEVICES=GPU-12", truncated=True)
    assert cut.get("CUDA_VISIBLE_DEVICES") is None and cut.get("RANK") == "1"


def test_the_environment_read_is_bounded(
    start_process: Callable[..., subprocess.Popen[str]],
) -> None:
    big = start_process(PADDING="x" * 100_000, RANK="7")
    cut = read_cuda_environment(big.pid, limit=1000)
    assert cut is not None and cut.get("RANK") is None
    whole = read_cuda_environment(big.pid, limit=ENVIRON_LIMIT_BYTES)
    assert whole is not None and whole.get("RANK") == "7"


def test_the_cuda_view_travels_to_the_lab_view_unchanged(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    fake_backend: Callable[..., NvmlBackend],
) -> None:
    rank = start_process(CUDA_VISIBLE_DEVICES=f"{UUIDS[2]},{UUIDS[0]}", RANK="1", WORLD_SIZE="2")
    document = snapshot_to_json(fake_backend(scenario_file(four_cards({2: [rank.pid]}))).sample())
    back = snapshot_from_json(document)
    (process,) = back.gpus[2].processes
    assert process.cuda is not None and process.cuda.devices == (2, 0)
    assert process.cuda.rank == 1 and process.cuda.world_size == 2
    assert snapshot_to_json(back) == document


def test_the_process_detail_shows_a_hostile_environment_as_visible_escapes(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    fake_backend: Callable[..., NvmlBackend],
) -> None:
    hostile = start_process(
        MASTER_ADDR="evil\x1b[2J", MASTER_PORT="1", RANK="0", CUDA_DEVICE_ORDER="X\x1b]0;t\x07"
    )
    snapshot = fake_backend(scenario_file(four_cards({1: [hostile.pid]}))).sample()
    (process,) = snapshot.gpus[1].processes
    text = "\n".join(line.text for line in describe_process(snapshot, process))
    assert "rendezvous evil\\e[2J:1" in text and "CUDA_DEVICE_ORDER=X\\e]0;t\\x07" in text
    assert "\x1b" not in text and "\x07" not in text


def test_a_sampler_that_shows_no_cuda_view_resolves_none(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
) -> None:
    """The recorder and a job's usage meter sample with ``cuda_views=False``: the same
    processes, no per-process ``cuda:N`` resolution (a fifth of the recorder's CPU)."""
    from gputop.core.sampling.nvml_backend import SamplingOptions
    from gputop.core.sampling.source import open_backend

    process = start_process(CUDA_VISIBLE_DEVICES=UUIDS[2])
    scenario = scenario_file(four_cards({2: [process.pid]}))
    views = {}
    for shown in (True, False):
        options = SamplingOptions(driver_probe=False, cuda_views=shown)
        backend = open_backend(scenario, environ={}, options=options)
        try:
            (found,) = backend.sample().gpus[2].processes
        finally:
            backend.close()
        assert found.pid == process.pid
        views[shown] = found.cuda
    assert views[True] is not None and views[True].devices == (2,)
    assert views[False] is None


def test_a_view_is_worked_out_once_per_environment_and_card_while_the_cards_stay(
    scenario_file: Callable[..., str],
) -> None:
    """docs/speed.md, "The busy server": the view depends on the variables, the card and
    the cards' identities, never on a moving reading; a card lost, or the driver probe's
    answer arriving, works it out again."""
    from gputop.core.probes.driver import DriverProbeResult
    from gputop.core.sampling.source import open_backend

    backend = open_backend(scenario_file(four_cards({})))
    try:
        gpus = backend.sample().gpus
    finally:
        backend.close()
    pinned = parse_environ(f"CUDA_VISIBLE_DEVICES={UUIDS[2]},{UUIDS[0]}\0".encode())
    same = parse_environ(f"CUDA_VISIBLE_DEVICES={UUIDS[2]},{UUIDS[0]}\0".encode())
    answers: dict[tuple[str | None, str | None], DriverProbeResult | None] = {}
    views = CudaViews()
    view = views.views_for(gpus, "550.54", lambda v, o: answers.get((v, o)))
    first = view(pinned, 2)
    assert first.devices == (2, 0) and not first.mismatch
    assert view(same, 2) is first  # an equal environment: the same view, not worked again
    assert view(pinned, 1).mismatch  # another card: its own view
    moved = [dataclasses.replace(g, temperature_c=(g.temperature_c or 0) + 9) for g in gpus]
    assert views.views_for(moved, "550.54")(pinned, 2) is first  # readings move: kept
    # The driver probe answers for these variables: its enumeration is the view from then on.
    answers[(f"{UUIDS[2]},{UUIDS[0]}", None)] = DriverProbeResult("ok", (UUIDS[0], UUIDS[2]))
    answered = view(pinned, 2)
    assert answered.devices == (0, 2) and answered.devices_from_driver
    assert view(pinned, 2) is answered
    lost = [dataclasses.replace(gpus[0], lost=True), *gpus[1:]]
    again = views.views_for(lost, "550.54")(pinned, 2)
    assert again is not first  # a card lost: worked out again
    expected = process_cuda(pinned, lost, "550.54", 2)
    assert again == expected
