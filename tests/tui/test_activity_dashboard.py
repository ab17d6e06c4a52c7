"""The dashboard's activity figures: a Hopper card, a pre-Hopper card and a Hopper MIG card.

A Hopper card shows GPM's SM active, tensor active and DRAM beside its utilisation (the
compact line too, at 80x24) and the throttle badge; a pre-Hopper card shows none of it, and
nothing in its place. docs/activity.md says what the figures are. Snapshots at 200x50 and
80x24; regenerate with ``--snapshot-update`` after an intended change, and look at them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.dashboard import first_sample, make_app
from helpers.scenarios import minimal_gpu
from textual.pilot import Pilot

from gputop.core.model import NO_ACTIVITY, Activity
from gputop.tui.widgets.gpu_card import activity_text
from gputop.tui.widgets.gpu_grid import GpuGrid

SIZES = {"200x50": (200, 50), "80x24": (80, 24)}
H100 = {"name": "NVIDIA H100 80GB HBM3", "cuda_compute_capability": [9, 0],
        "memory_total_mib": 81559, "power_limit_w": 700}  # fmt: skip


def activity_scenario(path: Path) -> str:
    """A throttled busy-looking H100 whose SMs idle, an A100, an H100 in MIG mode."""
    gpus: list[dict[str, Any]] = [
        minimal_gpu(**H100, utilization_gpu=100,
                    activity={"graphics": 99, "sm_active": 7, "tensor_active": 0.4,
                              "dram_active": 3},
                    clock_event_reasons=[{"reasons": ["sw_power_cap"], "until_s": 1e6}]),
        minimal_gpu(uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000",
                    pci_bus_id="00000000:08:00.0", utilization_gpu=88),
        minimal_gpu(**H100, uuid="GPU-33333333-aaaa-bbbb-cccc-000000000000",
                    pci_bus_id="00000000:09:00.0", utilization_gpu=70,
                    activity={"sm_active": 60, "tensor_active": 41, "dram_active": 52},
                    mig_mode=[1, 1],
                    mig_devices=[
                        {"uuid": "MIG-aaaaaaaa-5b6a-4789-8a9b-0c1d2e3f4a5b",
                         "gpu_instance_id": 1, "compute_instance_id": 0,
                         "memory_total_mib": 40000, "profile": "3g.40gb",
                         "activity": {"sm_active": 85, "tensor_active": 70}},
                        {"uuid": "MIG-bbbbbbbb-5b6a-4789-8a9b-0c1d2e3f4a5b",
                         "gpu_instance_id": 2, "compute_instance_id": 0,
                         "memory_total_mib": 20000, "profile": "2g.20gb",
                         "activity": {"sm_active": 4}},
                    ]),
    ]  # fmt: skip
    path.write_text(
        json.dumps({"description": "activity", "driver_version": "550.127.05",
                    "hostname": "hopper-1", "gpus": gpus}),
        encoding="utf-8",
    )  # fmt: skip
    return str(path)


async def with_figures(pilot: Pilot[None]) -> None:
    """Wait for the second sample: GPM's figures need two (docs/activity.md)."""
    await first_sample(pilot)
    app: Any = pilot.app
    while app.snapshot.gpus[0].activity.sm_active_percent is None:
        await pilot.pause(0.05)
    await pilot.pause()


@pytest.mark.parametrize("label", sorted(SIZES))
def test_activity_cards_look_as_approved(snap_compare, tmp_path: Path, label: str) -> None:  # type: ignore[no-untyped-def]
    app = make_app(activity_scenario(tmp_path / "activity.json"))
    assert snap_compare(app, terminal_size=SIZES[label], run_before=with_figures)


def _card_text(app: Any, index: int) -> str:
    grid = app.query_one(GpuGrid)
    text = "\n".join(line.plain for line in grid.card_content(index))
    return text + f" [{grid.subtitle(index)}]"


async def test_what_each_card_says(tmp_path: Path) -> None:
    app = make_app(activity_scenario(tmp_path / "activity.json"))
    async with app.run_test(size=SIZES["200x50"]) as pilot:
        await with_figures(pilot)
        hopper, ampere, mig = (_card_text(app, i) for i in range(3))
    assert "100% SM  7 TC  0 DRAM  3" in hopper
    assert "⚠ power cap" in hopper
    assert "SM" not in ampere.split("\n")[1] and "TC" not in ampere and "⚠" not in ampere
    assert "3g.40gb SM85" in mig and "2g.20gb SM4" in mig


async def test_the_compact_line_keeps_the_figures_at_80x24(tmp_path: Path) -> None:
    app = make_app(activity_scenario(tmp_path / "activity.json"))
    async with app.run_test(size=SIZES["80x24"]) as pilot:
        await with_figures(pilot)
        hopper, ampere = _card_text(app, 0), _card_text(app, 1)
    assert "SM 7 TC 0 DR 3" in hopper and "⚠" in hopper
    assert "SM" not in ampere and "⚠" not in ampere


def test_before_two_samples_the_labels_show_no_figure_and_without_gpm_nothing_shows() -> None:
    pending = activity_text(Activity(gpm=True))
    assert pending is not None and pending.plain == "SM -- TC -- DRAM --"
    tight = activity_text(Activity(gpm=True, sm_active_percent=99.6), tight=True)
    assert tight is not None and tight.plain == "SM100 TC-- DR--"
    assert activity_text(NO_ACTIVITY) is None
    assert activity_text(Activity(pcie_tx_bytes_per_s=1e6)) is None  # PCIe only: pre-Hopper


async def test_the_lab_shows_a_hopper_hosts_figures_and_badges() -> None:
    from helpers.lab_dashboard import first_lab_sample, lab_cards

    from gputop.tui.lab.fixed_hosts import FixedHosts, simulated_status
    from gputop.tui.lab.lab_app import LabApp

    statuses = [simulated_status("gpu02", "dgx-h100")]
    app = LabApp(FixedHosts(statuses), ["gpu02"], user="alice")
    async with app.run_test(size=SIZES["200x50"]) as pilot:
        await first_lab_sample(pilot)
        while not lab_cards(app):
            await pilot.pause(0.05)
        await pilot.pause()
        texts = {
            i: "\n".join(line.plain for line in cards.card_content(i)) + f" [{cards.subtitle(i)}]"
            for cards, i in lab_cards(app)
        }
    assert "SM 76 TC 51 DRAM 61" in texts[0]
    assert "⚠ power cap" in texts[3] and "⚠ thermal" in texts[5]
    assert "SM  8 TC  1 DRAM  1" in texts[7]  # "busy" at 92 % util, SMs almost idle


def test_a_fresh_throttle_badge_says_under_a_minute_not_0m(tmp_path: Path) -> None:
    from dataclasses import replace

    from gputop.core.sampling.source import open_backend
    from gputop.tui.widgets.gpu_card import throttle_badge

    backend = open_backend(activity_scenario(tmp_path / "activity.json"))
    try:
        hopper = backend.sample().gpus[0]
    finally:
        backend.close()
    assert throttle_badge(replace(hopper, throttled_for_s=0.0)) == "⚠ power cap <1m"
    assert throttle_badge(replace(hopper, throttled_for_s=59.9)) == "⚠ power cap <1m"
    assert throttle_badge(replace(hopper, throttled_for_s=180.0)) == "⚠ power cap 3m"
    assert throttle_badge(replace(hopper, throttled_for_s=None)) == "⚠ power cap"
