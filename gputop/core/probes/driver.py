"""Ask the CUDA driver itself which devices a process would see, without keeping a context.

A short-lived child loads ``libcuda`` through ctypes with the environment to test, calls
``cuInit`` and, for each ordinal, reads its UUID, SM count and PCI bus id, prints them and
exits: ``cuInit`` creates no context, and the child keeps the driver's state out of the
dashboard. With both variables unset the answer is the driver's own default order, which
no NVML call gives (docs/cuda-visibility.md, "The driver probe").
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, field

from gputop.core.probes.cuda_errors import (
    CUDA_ERROR_INVALID_DEVICE,
    CUDA_ERROR_NO_DEVICE,
    describe_cuda_error,
)
from gputop.core.records import frozen, mutable
from gputop.core.visibility import Visibility

LIBCUDA = "libcuda.so.1"
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
RETRY_FAILED_PROBE_AFTER_S = 60.0
"""A failed probe (no libcuda, a driver error, a timeout) is asked again after this long:
a driver may be installed, a module loaded or a container restarted meanwhile."""

_CHILD = r"""
import ctypes, json, sys
try:
    cuda = ctypes.CDLL(sys.argv[1])
except OSError as error:
    print(json.dumps({"status": "no-libcuda", "detail": str(error)}, allow_nan=False)); sys.exit(0)
def check(code, what):
    if code:
        answer = {"status": "cuda-error", "code": code, "detail": what}
        print(json.dumps(answer, allow_nan=False)); sys.exit(0)
check(cuda.cuInit(0), "cuInit")
count = ctypes.c_int(0)
check(cuda.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
get_uuid = getattr(cuda, "cuDeviceGetUuid_v2", None) or cuda.cuDeviceGetUuid
get_attribute = getattr(cuda, "cuDeviceGetAttribute", None)
get_bus_id = getattr(cuda, "cuDeviceGetPCIBusId", None)
devices = []
for ordinal in range(count.value):
    device = ctypes.c_int(0)
    check(cuda.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
    raw = (ctypes.c_ubyte * 16)()
    check(get_uuid(raw, device), "cuDeviceGetUuid")
    sms = ctypes.c_int(0)
    ok = get_attribute is not None and get_attribute(ctypes.byref(sms), ATTRIBUTE, device) == 0
    bus = ctypes.create_string_buffer(64)
    bus_ok = get_bus_id is not None and get_bus_id(bus, 64, device) == 0
    devices.append({"uuid": bytes(raw).hex(), "sms": sms.value if ok else None,
                    "pci": bus.value.decode("ascii", "replace") if bus_ok else None})
print(json.dumps({"status": "ok", "devices": devices}, allow_nan=False))
""".replace("ATTRIBUTE", str(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT))


@frozen
class ProbedDevice:
    """What the driver says about one CUDA ordinal."""

    uuid: str
    """``GPU-xxxxxxxx-...`` (a MIG device's UUID comes back in the same shape)."""
    multiprocessor_count: int | None
    """SMs (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT); None where the call failed."""
    pci_bus_id: str | None
    """``0000:41:00.0`` as cuDeviceGetPCIBusId writes it; None where the call failed."""


@frozen
class DriverProbeResult:
    status: str
    """ok, no-libcuda, no-device, or error."""
    uuids: tuple[str, ...] = ()
    """Per CUDA ordinal: ``GPU-xxxxxxxx-...`` (MIG devices' UUIDs keep the same shape)."""
    detail: str = ""
    devices: tuple[ProbedDevice, ...] = ()
    """Per CUDA ordinal, the same order as ``uuids``, with SM count and PCI bus id."""
    error_code: int | None = None
    """The CUresult of the call that failed, for status ``error``."""


def format_uuid(hex16: str) -> str:
    h = hex16.lower()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def run_driver_probe(
    cuda_visible_devices: str | None,
    cuda_device_order: str | None,
    *,
    library: str = LIBCUDA,
    timeout_s: float = 10.0,
) -> DriverProbeResult:
    from gputop.core.probes.torch_probe import child_environment  # not before a first probe

    env = child_environment(cuda_visible_devices, cuda_device_order)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, library],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return DriverProbeResult("error", detail=f"the driver did not answer in {timeout_s:g} s")
    except (IndexError, ValueError, OSError, RecursionError):
        return DriverProbeResult("error", detail="the probe process failed")
    return _parse_answer(answer)


def _parse_answer(answer: dict[str, object]) -> DriverProbeResult:
    status = answer.get("status")
    if status == "ok":
        try:
            devices = tuple(_device(entry) for entry in answer["devices"])  # type: ignore[attr-defined]
        except (KeyError, TypeError, ValueError):
            return DriverProbeResult("error", detail="the probe process answered nonsense")
        return DriverProbeResult("ok", tuple(d.uuid for d in devices), devices=devices)
    code = answer.get("code")
    if status == "cuda-error" and code in (CUDA_ERROR_NO_DEVICE, CUDA_ERROR_INVALID_DEVICE):
        return DriverProbeResult("no-device", error_code=int(code))
    if status == "no-libcuda":
        return DriverProbeResult("no-libcuda", detail=str(answer.get("detail", "")))
    if isinstance(code, int):
        detail = describe_cuda_error(code, str(answer.get("detail", "?")))
        return DriverProbeResult("error", detail=detail, error_code=code)
    return DriverProbeResult("error", detail="the probe process failed")


def _device(entry: dict[str, object]) -> ProbedDevice:
    sms = entry.get("sms")
    pci = entry.get("pci")
    return ProbedDevice(
        uuid=format_uuid(str(entry["uuid"])),
        multiprocessor_count=sms if isinstance(sms, int) and sms > 0 else None,
        pci_bus_id=pci if isinstance(pci, str) and pci else None,
    )


@mutable(eq=False)
class DriverProbe:
    """Driver probes cached per (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER).

    A driver's answer (devices, or no device) does not change while it runs, so it is kept.
    A failure is kept only ``retry_after_s``: the next ask after that runs the probe again.
    """

    library: str = LIBCUDA
    _: KW_ONLY
    retry_after_s: float = RETRY_FAILED_PROBE_AFTER_S
    clock: Callable[[], float] = time.monotonic
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _cache: dict[tuple[str | None, str | None], tuple[DriverProbeResult, float]] = field(
        default_factory=dict, init=False
    )

    def probe(
        self, cuda_visible_devices: str | None, cuda_device_order: str | None
    ) -> DriverProbeResult:
        key = (cuda_visible_devices, cuda_device_order)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None:
            result, at = cached
            if result.status in ("ok", "no-device"):
                return result
            if self.clock() - at < self.retry_after_s:
                return result
        result = run_driver_probe(cuda_visible_devices, cuda_device_order, library=self.library)
        with self._lock:
            self._cache[key] = (result, self.clock())
        return result

    def default_order(self) -> DriverProbeResult:
        """The driver's own numbering: both variables unset, so FASTEST_FIRST over all GPUs."""
        return self.probe(None, None)


def compare_with_rules(visibility: Visibility, probe: DriverProbeResult) -> tuple[str, str]:
    """(verified | disagrees | unavailable, a sentence for a person)."""
    if probe.status == "no-libcuda":
        return "unavailable", "not checked: no CUDA driver library (libcuda) here"
    if probe.status == "error":
        return "unavailable", f"not checked: {probe.detail}"
    expected = tuple(d.mig_uuid or d.uuid or "?" for d in visibility.devices)
    seen = probe.uuids if probe.status == "ok" else ()
    if _same(expected, seen):
        return "verified", f"verified by the CUDA driver ({len(seen)} device(s))"
    return "disagrees", (
        "the CUDA driver disagrees with gputop's rules: it sees "
        + (", ".join(u[:12] for u in seen) or "no device")
        + " where the rules say "
        + (", ".join(u[:12] for u in expected) or "no device")
    )


def uuid_key(uuid: str) -> str:
    """The hex part: cuDeviceGetUuid gives a MIG device's UUID in the GPU- shape."""
    return uuid.split("-", 1)[-1].lower()


def _same(expected: tuple[str, ...], seen: tuple[str, ...]) -> bool:
    return [uuid_key(u) for u in expected] == [uuid_key(u) for u in seen]


def order_note(visibility: Visibility, default: DriverProbeResult | None) -> tuple[str, str]:
    """(driver | pci | estimate, a sentence): where the numbering of ``cuda:N`` comes from.

    ``default`` is the probe with both variables unset (None where it was not asked). The
    fastest-first order is an estimate whenever that probe did not answer, and says so.
    """
    if (visibility.cuda_device_order or "").strip() == "PCI_BUS_ID":
        return "pci", "order: PCI bus order, as CUDA_DEVICE_ORDER=PCI_BUS_ID asks"
    if visibility.order_from_driver:
        return "driver", "order: fastest first, as the CUDA driver itself numbers the GPUs"
    if default is None:
        why = "the driver was not asked"
    elif default.status == "ok":
        why = "the driver's list does not match NVML's GPUs"
    elif default.status == "no-libcuda":
        why = "no CUDA driver library (libcuda) here"
    elif default.status == "no-device":
        why = "the CUDA driver sees no device"
    else:
        why = default.detail or default.status
    doubt = "" if visibility.order_certain else "; the GPUs differ, so it may be wrong"
    return "estimate", f"order: fastest first, estimated by gputop ({why}){doubt}"
