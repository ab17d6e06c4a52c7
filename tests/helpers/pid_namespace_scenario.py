"""Run by tests/multiuser/test_pid_namespace.py inside
``unshare --pid --fork --mount-proc --mount``.

In that fresh PID namespace it starts two local processes, one holding ``/dev/nvidia0``
open (a plain file the caller created on a private tmpfs mounted over /dev), writes a
scenario whose NVML pids are exactly those two local pids, samples it through gputop's own
backend and prints, as JSON, what gputop made of each pid. Also asks, as an unprivileged
user, about the holder, whose open files that user may not read.

``python pid_namespace_scenario.py WORKDIR``
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from gputop.core.sampling.pid_namespace import detect_pid_namespace, holds_nvidia_device
from gputop.core.sampling.source import open_backend

HOLD = "import time; f = open('/dev/nvidia0'); time.sleep(120)"
IDLE = "import time; time.sleep(120)"
NOBODY_ASKS = (
    "import json, sys; from gputop.core.sampling.pid_namespace import LocalPidGuard;"
    "print(json.dumps(LocalPidGuard().refusals({int(sys.argv[1]): None})))"
)


def main() -> None:
    workdir = Path(sys.argv[1])
    holder = subprocess.Popen([sys.executable, "-c", HOLD])
    idle = subprocess.Popen([sys.executable, "-c", IDLE])
    try:
        deadline = time.monotonic() + 30
        while not holds_nvidia_device(holder.pid):
            if time.monotonic() > deadline:
                raise SystemExit("the holder never opened /dev/nvidia0")
            time.sleep(0.02)
        processes = [
            {"pid": pid, "type": "C", "used_memory_mib": 100, "user": "scenario-user",
             "cmd": ["python", "train.py"]}
            for pid in (holder.pid, idle.pid)
        ]  # fmt: skip
        scenario = workdir / "scenario.json"
        scenario.write_text(
            json.dumps(
                {
                    "driver_version": "550.127.05",
                    "gpus": [
                        {
                            "name": "NVIDIA A100-SXM4-40GB",
                            "uuid": "GPU-11111111-aaaa-bbbb-cccc-000000000000",
                            "processes": processes,
                        }
                    ],
                }
            )
        )
        backend = open_backend(str(scenario), environ={"GPUTOP_FAKE_TIME": "30"})
        try:
            sample = backend.sample()
        finally:
            backend.close()
        seen = {
            str(p.pid): {"origin": p.origin.value, "hint": p.hint, "user": p.user}
            for gpu in sample.gpus
            for p in gpu.processes
        }
        nobody = None
        python = os.environ.get("NOBODY_PYTHON")  # one that uid 65534 may run, and its path
        if shutil.which("setpriv") is not None and python:
            nobody = subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                 python, "-c", NOBODY_ASKS, str(holder.pid)],
                capture_output=True, text=True, check=False,
                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ["NOBODY_PYTHONPATH"]},
            )  # fmt: skip
        print(
            json.dumps(
                {
                    "nested": detect_pid_namespace().nested,
                    "holder": holder.pid,
                    "idle": idle.pid,
                    "seen": seen,
                    "nobody": None
                    if nobody is None
                    else nobody.stdout.strip() or nobody.stderr.strip(),
                }
            )
        )
    finally:
        for child in (holder, idle):
            child.kill()
            child.wait()


if __name__ == "__main__":
    main()
