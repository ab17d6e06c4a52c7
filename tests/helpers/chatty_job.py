"""A training loop stand-in for the fault tests: a line per step, on and on.

``python chatty_job.py [--lines COUNT] [--until FILE] [--exit N]``

Writes ``step N`` lines to stdout as fast as it can (only COUNT of them, then idles). A
write that fails (a full disk) is dropped and the loop goes on, as a training loop's print
would be lost while it trains on. Once FILE exists it exits with status N.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--until")
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--lines", type=int)
    args = parser.parse_args()
    step = 0
    while args.until is None or not os.path.exists(args.until):
        if args.lines is not None and step >= args.lines:
            time.sleep(0.05)
            continue
        line = f"step {step} loss {1.0 / (step + 1):.6f} " + "x" * 100 + "\n"
        try:
            os.write(1, line.encode())
        except OSError:
            time.sleep(0.01)  # the disk is full: the step is not logged, training goes on
        step += 1
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
