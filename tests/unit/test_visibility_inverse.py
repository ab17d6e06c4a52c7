"""Pinning chosen cards: the environment a launch gets, round-tripped through the rules."""

from __future__ import annotations

import pytest
from helpers.visibility_machines import MIG_B, MIG_C, four_same, gpu, mig_box, mixed
from hypothesis import given, settings
from hypothesis import strategies as st

from gputop.core.model import GpuSample
from gputop.core.visibility import SelectionError, pin_environment, resolve_visibility

MODELS = (
    ("NVIDIA H100 80GB HBM3", (9, 0), 132, 1980),
    ("NVIDIA A100-SXM4-80GB", (8, 0), 108, 1410),
    ("NVIDIA GeForce RTX 4090", (8, 9), 128, 2520),
    ("Tesla T4", (7, 5), 40, 1590),
    ("Tesla V100-SXM2-16GB", (7, 0), 80, 1530),
)


@st.composite
def machines_and_selections(draw: st.DrawFn) -> tuple[tuple[GpuSample, ...], list[int]]:
    count = draw(st.integers(min_value=1, max_value=8))
    models = draw(st.lists(st.sampled_from(MODELS), min_size=count, max_size=count))
    uuids = draw(
        st.lists(
            st.uuids(version=4).map(lambda u: f"GPU-{u}"),
            min_size=count,
            max_size=count,
            unique=True,
        )
    )
    gpus = tuple(gpu(i, uuids[i], *models[i]) for i in range(count))
    selection = draw(
        st.permutations(range(count)).flatmap(
            lambda order: st.integers(1, count).map(lambda n: list(order[:n]))
        )
    )
    return gpus, selection


@settings(max_examples=300, deadline=None)
@given(machines_and_selections(), st.booleans())
def test_pinning_round_trips_to_exactly_the_selection(
    case: tuple[tuple[GpuSample, ...], list[int]], use_uuids: bool
) -> None:
    gpus, selection = case
    pinning = pin_environment(gpus, selection, use_uuids=use_uuids)
    assert [d.physical_index for d in pinning.devices] == selection
    assert [d.logical_index for d in pinning.devices] == list(range(len(selection)))
    again = resolve_visibility(
        gpus, None, pinning.env["CUDA_VISIBLE_DEVICES"], pinning.env["CUDA_DEVICE_ORDER"]
    )
    assert [d.physical_index for d in again.devices] == selection


@settings(max_examples=100, deadline=None)
@given(machines_and_selections(), st.sampled_from([None, "FASTEST_FIRST", "PCI_BUS_ID"]))
def test_uuid_pinning_means_the_same_whatever_order_the_shell_has(
    case: tuple[tuple[GpuSample, ...], list[int]], inherited_order: str | None
) -> None:
    gpus, selection = case
    value = pin_environment(gpus, selection).env["CUDA_VISIBLE_DEVICES"]
    seen = resolve_visibility(gpus, None, value, inherited_order).devices
    assert [d.physical_index for d in seen] == selection


def test_the_environment_is_pci_order_and_full_uuids_by_default() -> None:
    gpus = mixed()
    pinning = pin_environment(gpus, [3, 1])
    assert pinning.env == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": f"{gpus[3].uuid},{gpus[1].uuid}",
    }


def test_indices_on_request() -> None:
    assert pin_environment(mixed(), [2, 0], use_uuids=False).env["CUDA_VISIBLE_DEVICES"] == "2,0"


def test_a_mig_instance_can_be_pinned_by_its_uuid() -> None:
    pinning = pin_environment(mig_box(), [MIG_B], driver_version="550.54.15")
    assert pinning.env["CUDA_VISIBLE_DEVICES"] == MIG_B
    assert [d.mig_uuid for d in pinning.devices] == [MIG_B]


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        ([], "No GPU selected"),
        ([7], "There is no GPU 7; this machine has GPUs 0, 1, 2, 3"),
        ([1, 1], "chosen twice"),
        (["MIG-nope"], "no MIG device"),
    ],
)
def test_a_bad_selection_says_what_is_wrong(selection: list[int | str], message: str) -> None:
    with pytest.raises(SelectionError, match=message):
        pin_environment(four_same(), selection)


def test_a_whole_mig_gpu_cannot_be_pinned() -> None:
    with pytest.raises(SelectionError, match="MIG mode"):
        pin_environment(mig_box(), [0])


def test_a_lost_gpu_cannot_be_pinned() -> None:
    from dataclasses import replace

    gpus = four_same()
    gpus = (replace(gpus[0], lost=True), *gpus[1:])
    with pytest.raises(SelectionError, match="lost"):
        pin_environment(gpus, [0])


def test_two_mig_instances_before_r570_are_pinned_with_a_warning_that_one_is_seen() -> None:
    pinning = pin_environment(mig_box(), [MIG_B, MIG_C], driver_version="535.104.05")
    assert pinning.env["CUDA_VISIBLE_DEVICES"] == f"{MIG_B},{MIG_C}"
    assert [d.mig_uuid for d in pinning.devices] == [MIG_B]
    (warning,) = pinning.warnings
    assert "sees a single MIG instance" in warning and MIG_B in warning


def test_two_mig_instances_from_r570_are_both_pinned_without_a_warning() -> None:
    pinning = pin_environment(mig_box(), [MIG_B, MIG_C], driver_version="570.86.15")
    assert [d.mig_uuid for d in pinning.devices] == [MIG_B, MIG_C]
    assert pinning.warnings == ()
