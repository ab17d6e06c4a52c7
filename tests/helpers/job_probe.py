"""A stand-in job for end-to-end tests: reports what it was given, then behaves as asked.

``python job_probe.py OUT [--sleep S] [--exit N] [--kill-self SIGNAL] [--child-ignoring-term]``

Writes OUT (atomically) with its pid, process group, session, working directory and the
GPU variables of its environment, then sleeps, spawns a child that ignores SIGTERM (same
process group), ends itself with a signal, or exits with a code.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

WATCHED = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUTOP_JOB_ID", "GPUTOP_FAKE")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--kill-self", choices=["TERM", "KILL"])
    parser.add_argument("--child-ignoring-term", action="store_true")
    parser.add_argument("--say", default="probe ran")
    args = parser.parse_args()

    child_pid = None
    if args.child_ignoring_term:
        previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the child
        child_pid = os.fork()
        if child_pid == 0:
            while True:
                time.sleep(60)
        signal.signal(signal.SIGTERM, previous)

    report = {
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "sid": os.getsid(0),
        "ppid": os.getppid(),
        "cwd": os.getcwd(),
        "child_pid": child_pid,
        "stdin_is_tty": sys.stdin.isatty(),
        "env": {name: os.environ.get(name) for name in WATCHED},
        "sighup_default": signal.getsignal(signal.SIGHUP) == signal.SIG_DFL,
    }
    temporary = f"{args.out}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(report, handle)
    os.replace(temporary, args.out)
    print(args.say, flush=True)

    if args.sleep:
        time.sleep(args.sleep)
    if args.kill_self:
        os.kill(os.getpid(), getattr(signal, f"SIG{args.kill_self}"))
        time.sleep(5)
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
