"""Ask the CUDA driver itself which devices a process would see, without keeping a context.

A short-lived child process loads ``libcuda`` through ctypes with the environment to test,
calls ``cuInit``, ``cuDeviceGetCount`` and ``cuDeviceGetUuid`` for each ordinal, prints the
UUIDs and exits. ``cuInit`` creates no context, so no GPU memory is used; running it in a
child keeps the dashboard's own process free of the driver's state and of the variables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass

from gputop.core.visibility import Visibility

LIBCUDA = "libcuda.so.1"
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_INVALID_DEVICE = 101

_CHILD = r"""
import ctypes, json, sys
try:
    cuda = ctypes.CDLL(sys.argv[1])
except OSError as error:
    print(json.dumps({"status": "no-libcuda", "detail": str(error)})); sys.exit(0)
def check(code, what):
    if code:
        print(json.dumps({"status": "cuda-error", "code": code, "detail": what})); sys.exit(0)
check(cuda.cuInit(0), "cuInit")
count = ctypes.c_int(0)
check(cuda.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
get_uuid = getattr(cuda, "cuDeviceGetUuid_v2", None) or cuda.cuDeviceGetUuid
uuids = []
for ordinal in range(count.value):
    device = ctypes.c_int(0)
    check(cuda.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
    raw = (ctypes.c_ubyte * 16)()
    check(get_uuid(raw, device), "cuDeviceGetUuid")
    uuids.append(bytes(raw).hex())
print(json.dumps({"status": "ok", "uuids": uuids}))
"""


@dataclass(frozen=True, slots=True)
class DriverProbeResult:
    status: str
    """ok, no-libcuda, no-device, or error."""
    uuids: tuple[str, ...] = ()
    """Per CUDA ordinal: ``GPU-xxxxxxxx-...`` (MIG devices' UUIDs keep the same shape)."""
    detail: str = ""


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
    env = dict(os.environ)
    for name, value in (
        ("CUDA_VISIBLE_DEVICES", cuda_visible_devices),
        ("CUDA_DEVICE_ORDER", cuda_device_order),
    ):
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
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
    except (IndexError, ValueError, OSError):
        return DriverProbeResult("error", detail="the probe process failed")
    status = answer.get("status")
    if status == "ok":
        return DriverProbeResult("ok", tuple(format_uuid(u) for u in answer["uuids"]))
    if status == "cuda-error" and answer.get("code") in (
        CUDA_ERROR_NO_DEVICE,
        CUDA_ERROR_INVALID_DEVICE,
    ):
        return DriverProbeResult("no-device")
    if status == "no-libcuda":
        return DriverProbeResult("no-libcuda", detail=str(answer.get("detail", "")))
    return DriverProbeResult(
        "error", detail=f"{answer.get('detail', '?')} returned CUDA error {answer.get('code')}"
    )


class DriverProbe:
    """Driver probes cached per (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER): they never change."""

    def __init__(self, library: str = LIBCUDA) -> None:
        self._library = library
        self._lock = threading.Lock()
        self._cache: dict[tuple[str | None, str | None], DriverProbeResult] = {}

    def probe(
        self, cuda_visible_devices: str | None, cuda_device_order: str | None
    ) -> DriverProbeResult:
        key = (cuda_visible_devices, cuda_device_order)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None:
            return cached
        result = run_driver_probe(cuda_visible_devices, cuda_device_order, library=self._library)
        with self._lock:
            self._cache[key] = result
        return result


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


def _same(expected: tuple[str, ...], seen: tuple[str, ...]) -> bool:
    """MIG UUIDs come back from cuDeviceGetUuid in GPU- shape; compare the hex part."""

    def key(uuid: str) -> str:
        return uuid.split("-", 1)[-1].lower()

    return [key(u) for u in expected] == [key(u) for u in seen]
