"""Ask the interpreter a job will use what torch sees, in a subprocess.

gputop never imports torch: it costs seconds and, once CUDA starts, GPU memory on every card.
The user's jobs often run in another environment than gputop's, so the interpreter is the
one they name (``--python``) or the first ``python3`` on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict, field
from typing import Any

from gputop.core.records import frozen

_CHILD = r"""
import json, sys
try:
    import torch
except Exception as error:
    detail = f"{type(error).__name__}: {error}"
    print(json.dumps({"status": "no-torch", "detail": detail}, allow_nan=False))
    sys.exit(0)
info = {"status": "ok", "version": torch.__version__, "cuda": torch.version.cuda,
        "compiled": bool(torch.cuda._is_compiled()), "devices": []}
info["device_count"] = torch.cuda.device_count()
if info["compiled"]:
    for i in range(info["device_count"]):
        p = torch.cuda.get_device_properties(i)
        uuid = str(getattr(p, "uuid", "") or "")
        if uuid and not uuid.startswith(("GPU-", "MIG-")):
            uuid = "GPU-" + uuid
        info["devices"].append({"name": p.name, "uuid": uuid})
print(json.dumps(info, allow_nan=False))
"""


@frozen
class TorchProbeResult:
    status: str
    """ok, no-python, no-torch, cpu-only, or crashed."""
    message: str
    python: str | None = None
    version: str | None = None
    device_count: int | None = None
    devices: tuple[dict[str, str], ...] = field(default_factory=tuple)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "devices": list(self.devices)}


def child_environment(
    cuda_visible_devices: str | None, cuda_device_order: str | None
) -> dict[str, str]:
    """This process's environment with the CUDA variables a job would have (unset: None)."""
    env = dict(os.environ)
    for name, value in (
        ("CUDA_VISIBLE_DEVICES", cuda_visible_devices),
        ("CUDA_DEVICE_ORDER", cuda_device_order),
    ):
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def probe_torch(
    python: str | None,
    cuda_visible_devices: str | None,
    cuda_device_order: str | None,
    timeout_s: float = 60.0,
) -> TorchProbeResult:
    interpreter = python or shutil.which("python3")
    if interpreter is None or not shutil.which(interpreter):
        return TorchProbeResult("no-python", f"no interpreter {python or 'python3'} found")
    env = child_environment(cuda_visible_devices, cuda_device_order)
    try:
        done = subprocess.run(
            [interpreter, "-c", _CHILD],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return TorchProbeResult("crashed", f"{interpreter} took over {timeout_s:g} s", interpreter)
    except OSError as error:
        return TorchProbeResult("crashed", f"{interpreter} could not run: {error}", interpreter)
    try:
        info = json.loads(done.stdout.strip().splitlines()[-1])
        if not isinstance(info, dict):
            raise ValueError("not an object")
    except (IndexError, ValueError, RecursionError):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return TorchProbeResult(
            "crashed", f"{interpreter} failed (exit {done.returncode}): {last}", interpreter
        )
    if info.get("status") == "no-torch":
        return TorchProbeResult("no-torch", f"no torch in {interpreter}", interpreter)
    version = str(info.get("version"))
    count = int(info.get("device_count", 0))
    if not info.get("compiled"):
        return TorchProbeResult(
            "cpu-only",
            f"torch {version} in {interpreter} is a CPU-only build: it sees no GPU",
            interpreter,
            version,
            count,
        )
    devices = tuple(info.get("devices", ()))
    listing = ", ".join(
        f"cuda:{i} {d.get('uuid', '')[:12] or d.get('name', '?')}" for i, d in enumerate(devices)
    )
    return TorchProbeResult(
        "ok",
        f"torch {version} (CUDA {info.get('cuda')}) in {interpreter} sees {count} device(s)"
        + (f": {listing}" if listing else ""),
        interpreter,
        version,
        count,
        devices,
    )
