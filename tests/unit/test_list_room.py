"""A size-then-fill NVML list call offers the room its last call made (DriverSymbols.room):
one call fills it while the list fits, a list that grew past it is still read whole, and
room far past what a list needs is given back."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from gputop.core.nvml_layouts import NVML_ERROR_INSUFFICIENT_SIZE, NVML_SUCCESS, ProcessInfoV2
from gputop.core.sampling.nvml_running import COMPUTE, DriverSymbols, ListCall, call_list


class _Driver:
    """``nvmlDeviceGetComputeRunningProcesses_v3`` as NVML answers it, listing ``pids``."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.calls = 0

    def __call__(self, handle: Any, count: Any, entries: Any) -> int:
        self.calls += 1
        capacity = count.contents.value
        count.contents.value = len(self.pids)
        if not self.pids:
            return NVML_SUCCESS
        if entries is None or capacity < len(self.pids):
            return NVML_ERROR_INSUFFICIENT_SIZE
        assert ctypes.sizeof(entries) >= ctypes.sizeof(ProcessInfoV2) * len(self.pids)
        written = (ProcessInfoV2 * len(self.pids)).from_buffer(entries)
        for slot, pid in zip(written, self.pids, strict=True):
            slot.pid, slot.usedGpuMemory = pid, pid * 1024
        return NVML_SUCCESS


def _error(code: int) -> Exception:
    return RuntimeError(code)


@pytest.fixture
def driver() -> tuple[_Driver, DriverSymbols]:
    fake = _Driver()
    nvml = type("Binding", (), {"_nvmlGetFunctionPointer": staticmethod(lambda name: fake)})
    return fake, DriverSymbols(nvml)


def test_a_list_that_fits_the_room_of_the_last_call_takes_one_call(
    driver: tuple[_Driver, DriverSymbols],
) -> None:
    fake, symbols = driver
    call = ListCall(f"{COMPUTE}_v3", ProcessInfoV2)
    handle = object()
    fake.pids = list(range(100, 130))
    assert [row[0] for row in call_list(symbols, call, handle, _error)] == fake.pids
    assert fake.calls == 2  # the first: the size, then the fill
    for pids in (list(range(100, 130)), list(range(200, 210)), []):
        fake.pids, fake.calls = pids, 0
        assert [row[0] for row in call_list(symbols, call, handle, _error)] == pids
        assert fake.calls == 1, pids  # the room offered was enough
    fake.pids, fake.calls = list(range(1000, 1200)), 0  # grew past the room
    assert [row[0] for row in call_list(symbols, call, handle, _error)] == fake.pids
    assert fake.calls == 2


def test_room_far_past_the_list_is_given_back_and_each_device_keeps_its_own(
    driver: tuple[_Driver, DriverSymbols],
) -> None:
    fake, symbols = driver
    call = ListCall(f"{COMPUTE}_v3", ProcessInfoV2)
    big, small = object(), object()
    fake.pids = list(range(1, 4001))
    call_list(symbols, call, big, _error)
    assert symbols.room[(call.symbol, id(big))] >= 4000
    fake.pids = [7]
    call_list(symbols, call, big, _error)  # 4,000 processes ended
    assert symbols.room[(call.symbol, id(big))] < 64
    call_list(symbols, call, small, _error)
    fake.pids, fake.calls = [7, 8], 0
    for handle in (big, small, big, small):
        call_list(symbols, call, handle, _error)
    assert fake.calls == 4


def test_a_driver_asking_room_for_billions_of_entries_is_a_failed_list(
    driver: tuple[_Driver, DriverSymbols],
) -> None:
    """A count no card holds (2^31 entries: 48 GiB of them) is the list's failure, refused
    before any array is made, and the room kept is not touched."""
    _, symbols = driver
    call = ListCall(f"{COMPUTE}_v3", ProcessInfoV2)

    def absurd(handle: Any, count: Any, entries: Any) -> int:
        count.contents.value = 2**31
        return NVML_ERROR_INSUFFICIENT_SIZE

    symbols._found[call.symbol] = absurd
    with pytest.raises(RuntimeError) as refused:
        call_list(symbols, call, object(), _error)
    assert refused.value.args == (NVML_ERROR_INSUFFICIENT_SIZE,)
    assert symbols.room == {}

    from gputop.core.sampling.nvml_processes import _info_call

    def absurd_samples(handle: Any, info: Any) -> int:
        info._obj.processSamplesCount = 2**31
        return NVML_ERROR_INSUFFICIENT_SIZE

    with pytest.raises(RuntimeError):
        _info_call(absurd_samples, _error, symbols.room)(object(), 0)
    assert symbols.room == {}
