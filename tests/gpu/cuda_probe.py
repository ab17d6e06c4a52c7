"""A CUDA process for the real-GPU suite: what the driver enumerates, memory held, load.

Standard library only, run as a script (``python cuda_probe.py MODE ...``), independent of
gputop: it is the reference the suite compares gputop with (docs/real-gpu.md).

- ``enumerate``: the devices a CUDA process gets under this environment, through
  ``cuInit``, ``cuDeviceGetCount`` and ``cuDeviceGetUuid_v2`` on ``libcuda.so.1`` (ctypes);
  prints ``{"status": "ok", "uuids": [32 hex digits, ...]}`` (``"no-device"`` with an empty
  list where the driver sees none, ``"cuda-error"`` with the call and code otherwise).
- ``hold --bytes N --ready FILE [--stop FILE] [--seconds S] [--all]``: allocates and touches
  N bytes on cuda:0 (every visible device with ``--all``), writes FILE (JSON: pid, backend,
  bytes, the enumeration), holds until FILE ``--stop`` exists or S seconds pass, frees, exits.
  The backend is torch where installed, else CuPy, else ctypes on libcuda (``cuMemAlloc``,
  needing nothing installed); ``--backend`` or ``GPUTOP_GPU_PROBE`` chooses (``nvcc``: a
  few lines of CUDA C compiled here, then exec'd in place, so the pid stays the same; only
  when asked, as a toolkit newer than the driver builds a program the driver refuses).
- ``copy --seconds S``: device-to-device copies of a large buffer on cuda:0 (ctypes), to load
  DRAM; ``matmul --seconds S``: a bf16 matrix-product loop (torch), to load the tensor cores.

``GPUTOP_GPU_LIBCUDA`` names another library (the tests' C imitation,
tests/helpers/fake_libcuda.py).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_INVALID_DEVICE = 101
LIBNVML = "libnvidia-ml.so.1"


class CudaError(Exception):
    def __init__(self, call: str, code: int) -> None:
        super().__init__(f"{call} returned CUresult {code}")
        self.call = call
        self.code = code


def libcuda() -> ctypes.CDLL:
    return ctypes.CDLL(os.environ.get("GPUTOP_GPU_LIBCUDA") or "libcuda.so.1")


def _check(code: int, call: str) -> None:
    if code:
        raise CudaError(call, code)


def enumerate_devices(cuda: ctypes.CDLL) -> list[str]:
    """The visible devices' UUIDs (32 hex digits each), in cuda:N order."""
    code = cuda.cuInit(0)
    if code == CUDA_ERROR_NO_DEVICE:
        return []
    _check(code, "cuInit")
    count = ctypes.c_int(0)
    _check(cuda.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
    get_uuid = getattr(cuda, "cuDeviceGetUuid_v2", None) or cuda.cuDeviceGetUuid
    uuids = []
    for ordinal in range(count.value):
        device = ctypes.c_int(0)
        _check(cuda.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
        raw = (ctypes.c_ubyte * 16)()
        _check(get_uuid(raw, device), "cuDeviceGetUuid")
        uuids.append(bytes(raw).hex())
    return uuids


def enumeration() -> dict[str, Any]:
    try:
        cuda = libcuda()
    except OSError as error:
        return {"status": "no-libcuda", "detail": str(error), "uuids": []}
    try:
        uuids = enumerate_devices(cuda)
    except CudaError as error:
        return {"status": "cuda-error", "call": error.call, "code": error.code, "uuids": []}
    return {"status": "ok" if uuids else "no-device", "uuids": uuids}


# --- holding memory ------------------------------------------------------------------------


def choose_backend(wanted: str) -> str:
    if wanted != "auto":
        return wanted
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():  # not a CPU-only build
            return "torch"
    if importlib.util.find_spec("cupy") is not None:
        return "cupy"
    # Not nvcc unless asked: a toolkit newer than the driver builds a program the driver
    # refuses, while ctypes on libcuda always speaks the driver's own version.
    return "ctypes"


def _hold_torch(nbytes: int, devices: int) -> list[Any]:
    import torch

    held = []
    for index in range(devices):
        block = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{index}")
        block.fill_(1)
        held.append(block)
    torch.cuda.synchronize()
    return held


def _hold_cupy(nbytes: int, devices: int) -> list[Any]:
    import cupy

    held = []
    for index in range(devices):
        with cupy.cuda.Device(index):
            block = cupy.ones(nbytes, dtype=cupy.uint8)
            cupy.cuda.Device(index).synchronize()
            held.append(block)
    return held


def _hold_ctypes(cuda: ctypes.CDLL, nbytes: int, devices: int) -> list[Any]:
    held = []
    for index in range(devices):
        device = ctypes.c_int(0)
        _check(cuda.cuDeviceGet(ctypes.byref(device), index), "cuDeviceGet")
        context = ctypes.c_void_p(0)
        _check(
            cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain"
        )
        _check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
        pointer = ctypes.c_uint64(0)
        _check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(nbytes)), "cuMemAlloc")
        _check(
            cuda.cuMemsetD8_v2(pointer, ctypes.c_ubyte(1), ctypes.c_size_t(nbytes)), "cuMemsetD8"
        )
        _check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
        held.append(pointer)
    return held


NVCC_SOURCE = r"""
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>
static double epoch(void) {
    struct timespec t; clock_gettime(CLOCK_REALTIME, &t); return t.tv_sec + t.tv_nsec / 1e9;
}
static int put(const char *path, const char *text) {
    char tmp[4096]; snprintf(tmp, sizeof tmp, "%s.part", path);
    FILE *f = fopen(tmp, "w"); if (!f) return 4;
    fputs(text, f); fclose(f); return rename(tmp, path) ? 4 : 0;
}
/* hold BYTES DEVICES SECONDS READY STOP DONE ENUMERATION-JSON */
int main(int argc, char **argv) {
    if (argc != 8) return 2;
    size_t n = strtoull(argv[1], 0, 10); int devices = atoi(argv[2]);
    double seconds = atof(argv[3]), allocated = epoch();
    for (int d = 0; d < devices; d++) {
        void *p; cudaSetDevice(d);
        if (cudaMalloc(&p, n) != cudaSuccess || cudaMemset(p, 1, n) != cudaSuccess) return 3;
        cudaDeviceSynchronize();
    }
    static char text[65536];
    snprintf(text, sizeof text, "{\"pid\": %d, \"backend\": \"nvcc\", \"bytes\": %zu, "
             "\"devices\": %d, \"enumeration\": %s, \"allocated_at\": %.3f, \"held_at\": %.3f}",
             getpid(), n, devices, argv[7], allocated, epoch());
    if (put(argv[4], text)) return 4;
    struct timespec start, now; clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (argv[5][0] && access(argv[5], F_OK) == 0) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 > seconds) break;
        usleep(20000);
    }
    cudaDeviceReset();
    if (argv[6][0]) {
        snprintf(text, sizeof text, "{\"pid\": %d, \"released_at\": %.3f}", getpid(), epoch());
        return put(argv[6], text);
    }
    return 0;
}
"""


def _exec_nvcc(args: argparse.Namespace, devices: int, seen: dict[str, Any]) -> None:
    """Compile the CUDA C above and become it (the pid the caller knows stays this one)."""
    folder = tempfile.mkdtemp(prefix="gputop-probe-")
    source = os.path.join(folder, "hold.cu")
    binary = os.path.join(folder, "hold")
    with open(source, "w") as file:
        file.write(NVCC_SOURCE)
    subprocess.run(["nvcc", "-O1", "-o", binary, source], check=True)
    os.execv(
        binary,
        [
            binary,
            str(args.bytes),
            str(devices),
            str(args.seconds),
            args.ready,
            args.stop or "",
            args.done or "",
            json.dumps(seen, allow_nan=False),
        ],
    )


def _write_atomically(path: str, document: dict[str, Any]) -> None:
    part = path + ".part"
    with open(part, "w") as file:
        json.dump(document, file, allow_nan=False)
    os.replace(part, path)


def _wait(seconds: float, stop: str | None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stop and os.path.exists(stop):
            return
        time.sleep(0.02)


def hold(args: argparse.Namespace) -> int:
    seen = enumeration()
    if seen["status"] != "ok":
        _write_atomically(args.ready, {"pid": os.getpid(), "error": seen, "enumeration": seen})
        return 3
    devices = len(seen["uuids"]) if args.all else 1
    backend = choose_backend(args.backend or os.environ.get("GPUTOP_GPU_PROBE") or "auto")
    if backend == "nvcc":
        _exec_nvcc(args, devices, seen)
    started = time.time()
    try:
        if backend == "torch":
            held = _hold_torch(args.bytes, devices)
        elif backend == "cupy":
            held = _hold_cupy(args.bytes, devices)
        else:
            held = _hold_ctypes(libcuda(), args.bytes, devices)
    except CudaError as error:
        _write_atomically(
            args.ready, {"pid": os.getpid(), "error": str(error), "enumeration": seen}
        )
        return 3
    _write_atomically(
        args.ready,
        {
            "pid": os.getpid(),
            "backend": backend,
            "bytes": args.bytes,
            "devices": devices,
            "enumeration": seen,
            "allocated_at": started,
            "held_at": time.time(),
        },
    )
    _wait(args.seconds, args.stop)
    del held
    if args.done:
        _write_atomically(args.done, {"pid": os.getpid(), "released_at": time.time()})
    return 0


# --- load ----------------------------------------------------------------------------------


def copy_loop(args: argparse.Namespace) -> int:
    """Device-to-device copies on cuda:0 until ``--seconds`` pass: DRAM busy, SMs idle."""
    cuda = libcuda()
    _check(cuda.cuInit(0), "cuInit")
    device = ctypes.c_int(0)
    _check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    context = ctypes.c_void_p(0)
    _check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    _check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    source, target = ctypes.c_uint64(0), ctypes.c_uint64(0)
    size = ctypes.c_size_t(args.bytes)
    _check(cuda.cuMemAlloc_v2(ctypes.byref(source), size), "cuMemAlloc")
    _check(cuda.cuMemAlloc_v2(ctypes.byref(target), size), "cuMemAlloc")
    copies = 0
    if args.ready:
        _write_atomically(args.ready, {"pid": os.getpid(), "started_at": time.time()})
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        for _ in range(8):
            _check(cuda.cuMemcpyDtoD_v2(target, source, size), "cuMemcpyDtoD")
        _check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
        copies += 8
    print(json.dumps({"copies": copies, "bytes_each": args.bytes}))
    return 0


def matmul_loop(args: argparse.Namespace) -> int:
    """bf16 matrix products on cuda:0 until ``--seconds`` pass: tensor cores and SMs busy."""
    import torch

    a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
    if args.ready:
        _write_atomically(args.ready, {"pid": os.getpid(), "started_at": time.time()})
    products = 0
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        for _ in range(16):
            a @ b
        torch.cuda.synchronize()
        products += 16
    print(json.dumps({"products": products}))
    return 0


# --- the driver's energy counter (NVML, read by the suite itself) ----------------------------


def energy_mj(gpu_uuid: str) -> int | None:
    """The card's energy counter in millijoules (nvmlDeviceGetTotalEnergyConsumption), read
    through ctypes on libnvidia-ml.so.1; None where the driver has no such counter."""
    try:
        nvml = ctypes.CDLL(LIBNVML)
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        handle = ctypes.c_void_p(0)
        if nvml.nvmlDeviceGetHandleByUUID(gpu_uuid.encode(), ctypes.byref(handle)) != 0:
            return None
        energy = ctypes.c_ulonglong(0)
        if nvml.nvmlDeviceGetTotalEnergyConsumption(handle, ctypes.byref(energy)) != 0:
            return None
        return int(energy.value)
    finally:
        nvml.nvmlShutdown()


def cuda_driver_version() -> int | None:
    """cuDriverGetVersion: 12040 is CUDA 12.4; None where libcuda does not load."""
    try:
        cuda = libcuda()
    except OSError:
        return None
    version = ctypes.c_int(0)
    call = getattr(cuda, "cuDriverGetVersion", None)
    return version.value if call is not None and call(ctypes.byref(version)) == 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    modes.add_parser("enumerate")
    holding = modes.add_parser("hold")
    holding.add_argument("--bytes", type=int, required=True)
    holding.add_argument("--ready", required=True)
    holding.add_argument("--stop")
    holding.add_argument("--done")
    holding.add_argument("--seconds", type=float, default=600.0)
    holding.add_argument("--all", action="store_true")
    holding.add_argument("--backend", choices=("auto", "torch", "cupy", "nvcc", "ctypes"))
    for name in ("copy", "matmul"):
        load = modes.add_parser(name)
        load.add_argument("--seconds", type=float, required=True)
        load.add_argument("--bytes", type=int, default=1 << 30)
        load.add_argument("--ready")
    args = parser.parse_args(argv)
    if args.mode == "enumerate":
        print(json.dumps(enumeration(), allow_nan=False))
        return 0
    if args.mode == "hold":
        return hold(args)
    return copy_loop(args) if args.mode == "copy" else matmul_loop(args)


if __name__ == "__main__":
    sys.exit(main())
