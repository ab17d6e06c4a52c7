"""The CUDA driver's CUDA_VISIBLE_DEVICES rules, with the research notes' own examples.

Rule numbers are those of docs/cuda-visibility.md. On ``four_same`` (four identical
GPUs) CUDA's default order equals nvidia-smi's, so integer entries are physical indices.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers.visibility_machines import (
    MIG_A,
    MIG_B,
    MIG_C,
    U,
    four_same,
    gpu,
    mig_box,
    mixed,
)
from helpers.visibility_machines import (
    codes as warning_codes,
)

from gputop.core.model import MigDevice
from gputop.core.visibility import resolve_visibility


def physical(value: str | None, order: str | None = None, gpus=None, driver="550.54.15"):  # type: ignore[no-untyped-def]
    visibility = resolve_visibility(gpus or four_same(), driver, value, order)
    return [d.physical_index for d in visibility.devices]


def codes(value: str | None, order: str | None = None, gpus=None, driver="550.54.15"):  # type: ignore[no-untyped-def]
    return warning_codes(resolve_visibility(gpus or four_same(), driver, value, order))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, [0, 1, 2, 3]),  # rule 1
        ("", []),  # rule 2
        (" ", []),  # rule 5: whitespace only
        ("0,2,-1,1", [0, 2]),  # rule 6 and 8
        ("-1", []),
        ("1,-1,0", [1]),
        ("0,1,5,2", [0, 1]),  # rule 7
        ("5", []),
        (" 0 ,1 ", [0, 1]),  # rule 4: leading whitespace, trailing rest ignored
        ("0, 1", [0, 1]),
        ("0 1", [0]),
        ("0,,1", [0]),  # rule 5: an empty entry is invalid
        (",0", []),
        ("0,", [0]),
        ("1gpu2,2ampere", [1, 2]),
        ("2, +3, -0, 5", [2, 3, 0]),
        ("+1", [1]),
        ("-0", [0]),
        ("-", []),
        ("+", []),
        ("00,01", [0, 1]),
        ("0x1", [0]),
        ("1.5,0", [1, 0]),
        ("a,0", []),
        ("0,a,1", [0]),
        ("0;1", [0]),  # rule 3: only commas split
        ("\t1,\n2", [1, 2]),
        ("3,2,1,0", [3, 2, 1, 0]),  # rule 3: list order is logical order
    ],
)
def test_integer_entries_follow_strtoul_and_stop_at_the_first_invalid(
    value: str | None, expected: list[int]
) -> None:
    assert physical(value) == expected


@pytest.mark.parametrize("value", ["0,0", "1,1", "0,1,0", "1,GPU-22222222", "GPU-11111111,0"])
def test_a_repeated_device_hides_every_gpu(value: str) -> None:  # rule 9
    assert physical(value) == []
    assert "duplicate" in codes(value)


def test_a_repeat_after_the_first_invalid_entry_does_not_count() -> None:  # rule 9
    assert physical("0,9,0") == [0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (U[0], [0]),  # rule 11: the full UUID
        ("GPU-44444444,GPU-11111111", [3, 0]),  # rule 13: list order kept
        ("GPU-2222", []),  # rule 12: ambiguous prefix
        ("GPU-2222f", [2]),
        ("GPU-22222222", [1]),
        ("GPU-", []),
        ("GPU-9", []),
        ("GPU-44444444,GPU-9,GPU-11111111", [3]),
        ("GPU-11111111,GPU-11111111", []),
        ("GPU-11111111,GPU-11", []),  # the same GPU twice, by two prefixes
        ("gpu-11111111", []),  # case-sensitive, and not a number
        ("11111111-aaaa-bbbb-cccc-000000000000", []),  # without GPU-: strtoul reads 11111111
        ("GPU-11111111-AAAA-BBBB-CCCC-000000000000", []),
        ("GPU-44444444,1", [3, 1]),
    ],
)
def test_uuid_entries_name_gpus_by_unique_prefix(value: str, expected: list[int]) -> None:
    assert physical(value) == expected


def test_an_ambiguous_prefix_says_which_gpus_it_matches() -> None:
    visibility = resolve_visibility(four_same(), "550.54.15", "GPU-2222", None)
    (warning,) = [w for w in visibility.warnings if w.code == "invalid-entry"]
    assert "entry 1 ('GPU-2222')" in warning.message
    assert "GPU 1, GPU 2" in warning.message


def test_the_entry_that_ended_the_list_is_named_with_its_reason() -> None:
    visibility = resolve_visibility(four_same(), "550.54.15", "1,5,0", None)
    assert visibility.stopped_at == 1
    (warning,) = [w for w in visibility.warnings if w.code == "invalid-entry"]
    assert "entry 2 ('5')" in warning.message
    assert "this machine has 4" in warning.message
    assert "the 1 after it" in warning.message


def test_a_negative_entry_says_it_is_negative() -> None:
    visibility = resolve_visibility(four_same(), "550.54.15", "0,-1", None)
    assert "negative" in visibility.warnings[0].message


def test_an_empty_value_hides_every_gpu_and_says_so() -> None:  # rule 2
    visibility = resolve_visibility(four_same(), "550.54.15", "", None)
    assert visibility.devices == ()
    assert warning_codes(visibility) == ("no-devices",)


# -- CUDA_DEVICE_ORDER ------------------------------------------------------------------------


def test_fastest_first_is_the_default_and_reorders_a_mixed_box() -> None:  # rules 10, 15-17
    assert physical(None, None, mixed()) == [3, 1, 0, 2]


def test_pci_bus_id_gives_nvidia_smi_order() -> None:  # rule 14
    assert physical(None, "PCI_BUS_ID", mixed()) == [0, 1, 2, 3]
    assert physical("0,1", "PCI_BUS_ID", mixed()) == [0, 1]
    assert codes("0,1", "PCI_BUS_ID", mixed()) == ()


def test_integer_entries_index_the_fastest_first_order() -> None:  # rule 10
    assert physical("0", None, mixed()) == [3]
    assert physical("2,0", "FASTEST_FIRST", mixed()) == [0, 3]


def test_uuid_entries_ignore_the_order() -> None:  # rule 13
    value = "GPU-30600000,GPU-74000000"
    assert physical(value, None, mixed()) == [0, 2]
    assert resolve_visibility(mixed(), "550.54.15", value, None).order_certain is True


def test_a_mixed_box_under_fastest_first_warns_that_indices_are_not_nvidia_smis() -> None:
    visibility = resolve_visibility(mixed(), "550.54.15", "0", None)
    assert visibility.order_certain is False
    (warning,) = [w for w in visibility.warnings if w.code == "fastest-first-differs"]
    assert "index 0 is GPU 3 (H100 PCIe)" in warning.message
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in warning.message
    assert "estimate" in warning.message


def test_identical_gpus_under_fastest_first_are_certain_and_quiet() -> None:  # rule 16
    visibility = resolve_visibility(four_same(), "550.54.15", None, None)
    assert visibility.order_certain is True
    assert visibility.warnings == ()


def test_equal_speeds_keep_pci_order() -> None:  # rule 16
    box = (
        gpu(0, U[0], "NVIDIA GeForce RTX 3060", (8, 6), 28, 1837),
        gpu(1, U[1], "NVIDIA A100-SXM4-40GB", (8, 0), 108, 1410),
        gpu(2, U[2], "NVIDIA A100-SXM4-40GB", (8, 0), 108, 1410),
    )
    assert physical(None, None, box) == [1, 2, 0]


def test_differing_gpus_without_speed_data_are_uncertain_and_say_so() -> None:
    box = (gpu(0, U[0], "Card A", None, None), gpu(1, U[1], "Card B", None, None))  # type: ignore[arg-type]
    visibility = resolve_visibility(box, "550.54.15", "0", None)
    assert visibility.order_certain is False
    assert "fastest-first-uncertain" in warning_codes(visibility)


def test_an_unknown_order_value_is_treated_as_fastest_first_with_a_warning() -> None:
    assert physical(None, "FASTEST", mixed()) == [3, 1, 0, 2]
    assert "unknown-order" in codes(None, "FASTEST", mixed())


# -- torch's view ------------------------------------------------------------------------------


def test_torch_helpers_reading_another_card_are_named() -> None:
    visibility = resolve_visibility(mixed(), "550.54.15", None, None)
    (warning,) = [w for w in visibility.warnings if w.code == "torch-nvml-mismatch"]
    assert "for cuda:0 they read GPU 0, not GPU 3" in warning.message


def test_torch_and_the_driver_agree_on_pci_order_and_nothing_is_said() -> None:
    assert "torch-nvml-mismatch" not in codes("1,0", "PCI_BUS_ID", mixed())


def test_a_bare_sign_warns_that_torch_raises() -> None:
    visibility = resolve_visibility(four_same(), "550.54.15", "0,-", None)
    assert [d.physical_index for d in visibility.devices] == [0]
    assert any("ValueError" in w.message for w in visibility.warnings)


def test_whitespace_before_a_uuid_warns_that_torch_counts_differently() -> None:
    visibility = resolve_visibility(four_same(), "550.54.15", " GPU-11111111", None)
    assert any("device_count() says 0" in w.message for w in visibility.warnings)


# -- MIG ---------------------------------------------------------------------------------------


def mig_physical(value: str | None, driver: str) -> list[str]:
    visibility = resolve_visibility(mig_box(), driver, value, None)
    return [d.mig_uuid or f"GPU {d.physical_index}" for d in visibility.devices]


def test_before_r570_a_process_sees_one_mig_instance_and_no_whole_gpu() -> None:  # rule 21
    assert mig_physical(None, "535.104.05") == [MIG_A]
    assert "mig-single-instance" in codes(None, gpus=mig_box(), driver="535.104.05")


def test_from_r570_every_gpu_instance_and_whole_gpu_is_visible() -> None:  # rule 22
    assert mig_physical(None, "570.86.10") == [MIG_A, MIG_B, MIG_C, "GPU 1"]
    assert "mig-order-uncertain" in codes(None, gpus=mig_box(), driver="570.86.10")


def test_a_mig_uuid_entry_selects_that_instance() -> None:  # rule 19
    assert mig_physical(MIG_B, "570.86.10") == [MIG_B]
    assert mig_physical("MIG-cccc", "550.54.15") == [MIG_C]


def test_the_legacy_mig_form_works_with_an_abbreviated_gpu_uuid() -> None:  # rule 20
    assert mig_physical("MIG-GPU-11111111/2/0", "460.91.03") == [MIG_B]
    assert mig_physical("MIG-GPU-11111111/2/0", "570.86.10") == [MIG_B]


def test_the_mig_uuid_form_is_refused_before_r470() -> None:  # rule 19
    visibility = resolve_visibility(mig_box(), "460.91.03", MIG_B, None)
    assert visibility.devices == ()
    assert "R470" in visibility.warnings[0].message


def test_a_legacy_mig_entry_for_a_missing_instance_is_invalid() -> None:
    visibility = resolve_visibility(mig_box(), "550.54.15", "MIG-GPU-11111111/9/0", None)
    assert visibility.devices == ()
    assert "GPU instance 9" in visibility.warnings[0].message


def test_before_r570_a_whole_gpu_listed_beside_a_mig_instance_is_hidden() -> None:  # rule 21
    assert mig_physical(f"{U[1]},{MIG_A}", "535.104.05") == [MIG_A]


def test_from_r570_one_compute_instance_per_gpu_instance() -> None:  # rule 22
    box = mig_box()
    twin = MigDevice(3, "MIG-dddddddd-1111-2222-3333-444444444444", 1, 1, None, None, 7)
    box = (replace(box[0], mig_devices=(*box[0].mig_devices, twin)), box[1])
    visibility = resolve_visibility(box, "570.86.10", f"{MIG_A},{twin.uuid}", None)
    assert [d.mig_uuid for d in visibility.devices] == [MIG_A]
    assert "mig-one-ci-per-gi" in warning_codes(visibility)


def test_a_mig_gpu_without_instances_exposes_no_device() -> None:  # rule 25
    box = mig_box()
    box = (replace(box[0], mig_devices=()), box[1])
    visibility = resolve_visibility(box, "570.86.10", None, None)
    assert [d.physical_index for d in visibility.devices] == [1]
    assert "mig-no-instances" in warning_codes(visibility)


def test_mig_devices_carry_their_parent_and_their_own_name() -> None:
    (device,) = resolve_visibility(mig_box(), "550.54.15", MIG_B, None).devices
    assert device.physical_index == 0 and device.uuid == U[0]
    assert device.name == "NVIDIA A100-SXM4-80GB MIG 2g.20gb"


def test_torch_cannot_map_mig_and_miscounts_it() -> None:
    warning = " ".join(
        w.message for w in resolve_visibility(mig_box(), "535.104.05", None, None).warnings
    )
    assert "cannot map MIG" in warning and "device_count() says 2" in warning
