"""gputop's rules against torch's own parser, on many generated CUDA_VISIBLE_DEVICES values.

Needs torch (CI installs the CPU build, ``pip install torch==2.13.0``; plain ``make test``
skips these). torch's private helpers read NVML, which is patched with a fixed UUID list so
the CPU build answers as on a 4-GPU machine. Where the research notes say torch matches the
driver, gputop's driver rules must agree with torch; where they say torch differs, the
documented difference must show.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from helpers.visibility_machines import U, codes, four_same, mixed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputop.core.visibility import resolve_visibility
from gputop.core.visibility.torch_rules import (
    parse_visible_devices,
    strtoul,
    torch_view,
    transform_uuid_to_ordinals,
)

if importlib.util.find_spec("torch") is None:
    pytest.skip(
        "torch is not installed: CI installs the CPU build for these tests",
        allow_module_level=True,
    )


def cuda() -> Any:
    """``torch.cuda``, imported when a test first uses it rather than when this file is
    collected: every pytest-xdist worker collects every file, and importing torch takes
    about 2.7 s of CPU (docs/testing.md)."""
    with warnings.catch_warnings():  # the CPU build without numpy says so as it loads
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch

    return torch.cuda


INTEGER_TOKENS = ["0", "1", "2", "3", "4", "7", "-1", "-0", "+2", "00", " 1", "2 ", "1gpu",
                  "a", "", "1.5", "0x1", " ", "\t3"]  # fmt: skip
UUID_TOKENS = ["GPU-1111", "GPU-2222", "GPU-2222f", "GPU-22222222", "GPU-4", "GPU-", "GPU-9",
               U[0], U[3], " GPU-1111", "GPU-11111111-AAAA"]  # fmt: skip
values = st.one_of(
    st.lists(st.sampled_from(INTEGER_TOKENS), min_size=1, max_size=6).map(",".join),
    st.lists(st.sampled_from(UUID_TOKENS), min_size=1, max_size=5).map(",".join),
    st.lists(st.sampled_from(INTEGER_TOKENS + UUID_TOKENS), min_size=1, max_size=5).map(",".join),
)


@contextmanager
def visible(value: str) -> Iterator[None]:
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = value
    try:
        yield
    finally:
        if saved is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved


@pytest.fixture
def nvml_of_four(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda(), "_raw_device_count_nvml", lambda: len(U))
    monkeypatch.setattr(cuda(), "_raw_device_uuid_nvml", lambda: list(U))


def torch_parse(value: str) -> list[int] | list[str] | str:
    with visible(value):
        try:
            return cuda()._parse_visible_devices()
        except ValueError:
            return "ValueError"


@settings(max_examples=400, deadline=None)
@given(values)
def test_gputops_copy_of_torchs_parser_matches_torch(value: str) -> None:
    try:
        ours: object = parse_visible_devices(value)
    except ValueError:
        ours = "ValueError"
    assert ours == torch_parse(value)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(UUID_TOKENS), max_size=5))
def test_gputops_copy_of_torchs_uuid_matcher_matches_torch(candidates: list[str]) -> None:
    assert transform_uuid_to_ordinals(candidates, U) == cuda()._transform_uuid_to_ordinals(
        candidates, list(U)
    )


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values)
def test_torchs_device_count_is_what_gputop_predicts(nvml_of_four: None, value: str) -> None:
    with visible(value):
        try:
            count: object = cuda()._device_count_nvml()
        except ValueError:
            count = "ValueError"
    view = torch_view(value, U)
    expected = "ValueError" if view.nvml_indices is None else len(view.nvml_indices)
    assert count == expected


def documented_difference(value: str) -> bool:
    """Where the notes say torch and the driver part ways (or the driver is untested)."""
    tokens = value.split(",")
    bare_sign = any(t.strip() in ("+", "-") for t in tokens)
    uuid_mode = value.startswith("GPU-")
    mixed_modes = any(t.lstrip().startswith("GPU-") for t in tokens) and not all(
        t.startswith("GPU-") for t in tokens
    )
    return (
        bare_sign
        or mixed_modes
        or (not uuid_mode and any(" GPU-" in t for t in tokens))
        or repeat_beyond_the_drivers_stop(value)
    )


def repeat_beyond_the_drivers_stop(value: str) -> bool:
    """torch looks for repeats in the whole list; the driver only before its first invalid
    entry (rule 9), so a repeat after that empties torch's list but not the driver's."""
    stop = resolve_visibility(four_same(), None, value, None).stopped_at
    if stop is None:
        return False
    tokens = value.split(",")
    if value.startswith("GPU-"):
        keys: list[object] = list(tokens)
    else:
        keys = [strtoul(t.strip()) for t in tokens if t.strip() not in ("+", "-")]
    return len(set(keys)) != len(keys)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values)
def test_on_identical_gpus_the_driver_rules_agree_with_torch(
    nvml_of_four: None, value: str
) -> None:
    if documented_difference(value):
        return
    driver = [d.physical_index for d in resolve_visibility(four_same(), None, value, None).devices]
    with visible(value):
        count = cuda()._device_count_nvml()
        torch_devices = [cuda()._get_nvml_device_index(i) for i in range(count)]
    assert driver == torch_devices


def test_a_bare_sign_makes_torch_raise_where_the_driver_just_stops(nvml_of_four: None) -> None:
    assert torch_parse("0,-") == "ValueError"
    driver = resolve_visibility(four_same(), None, "0,-", None)
    assert [d.physical_index for d in driver.devices] == [0]


def test_a_digit_int_cannot_read_makes_torch_raise_and_gputop_says_which(
    nvml_of_four: None,
) -> None:
    """'²' is a digit to str.isdigit, which torch's parser asks, and none to int(), which it
    then calls: torch raises, and gputop's note says so instead of blaming a bare sign."""
    assert torch_parse("1,²") == "ValueError"
    problem = torch_view("1,²", U).problem or ""
    assert "'²'" in problem and "bare sign" not in problem
    assert "'-'" in (torch_view("0,-", U).problem or "")


def test_on_a_mixed_box_torch_ignores_fastest_first(nvml_of_four: None) -> None:
    with visible("0"):
        assert cuda()._get_nvml_device_index(0) == 0
    driver = resolve_visibility(mixed(), None, "0", None)
    assert driver.devices[0].physical_index == 3
    assert "torch-nvml-mismatch" in codes(driver)


def test_torch_does_not_trim_out_of_range_entries(nvml_of_four: None) -> None:
    with visible("0,1,5,2"):
        assert cuda()._device_count_nvml() == 2
        assert cuda()._parse_visible_devices() == [0, 1, 5, 2]
    driver = resolve_visibility(four_same(), None, "0,1,5,2", None)
    assert [d.physical_index for d in driver.devices] == [0, 1]


def test_a_repeat_after_an_out_of_range_entry_empties_torchs_list_not_the_drivers(
    nvml_of_four: None,
) -> None:
    with visible("0,4,0"):
        assert cuda()._device_count_nvml() == 0
    driver = resolve_visibility(four_same(), None, "0,4,0", None)
    assert [d.physical_index for d in driver.devices] == [0]
    assert any("device_count() says 0" in w.message for w in driver.warnings)
