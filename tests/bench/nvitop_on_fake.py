"""nvitop on gputop's simulated GPUs, for ``make bench NVITOP_PYTHON=...`` (measurement only).

Run by a Python that has nvitop installed (a separate virtualenv: nvitop is no dependency
of gputop): ``python nvitop_on_fake.py SCENARIO [nvitop's arguments]``. nvitop needs a real
NVML; here pynvml's functions are replaced by gputop's simulated ones (``gputop.core.fake``,
which needs only psutil and nvidia-ml-py) wherever the simulation implements them: before
nvitop imports pynvml, and again in nvitop's own ``libnvml`` after it has replaced some of
them (process lists, memory information) with ctypes calls into the real library. Fields the
simulation lacks read as N/A in nvitop, as on a driver without them.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pynvml

from gputop.core.fake import load_fake_nvml


def main() -> int:
    fake = load_fake_nvml(sys.argv.pop(1))
    implemented = {
        name for cls in type(fake).__mro__ for name in vars(cls) if name.startswith("nvml")
    }
    shim = types.ModuleType("pynvml")
    shim.__dict__.update(vars(pynvml))
    for name, value in vars(pynvml).items():
        if name.startswith("nvml") and callable(value):
            setattr(shim, name, getattr(fake, name))
    sys.modules["pynvml"] = shim

    from nvitop.api import libnvml

    for name in implemented:
        if hasattr(libnvml, name):
            setattr(libnvml, name, getattr(fake, name))
    from nvitop.cli import main as nvitop_main

    return int(nvitop_main() or 0)


if __name__ == "__main__":
    raise SystemExit(main())
