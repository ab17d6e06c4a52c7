"""Where one busy sample's CPU goes: ``NvmlBackend.sample()`` on the busy server (issue 44)
with its 200 live stand-ins, in-process, at 1-s intervals.

    python tests/bench/sampler_profile.py [--samples 30] [--profile]

Prints the thread CPU time of each sample (median, minimum) and, with ``--profile``, the
cProfile of the samples after the first, by tottime and by cumtime.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

from busy_scenario import busy  # noqa: E402
from stand_ins import live_scenario  # noqa: E402

from gputop.core.sampling.source import open_backend  # noqa: E402

SCENARIO = REPO / "gputop" / "core" / "fake" / "scenarios" / "dgx-h100.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    with live_scenario(SCENARIO, busy) as (scenario, count):
        backend = open_backend(str(scenario))
        started = time.thread_time()
        backend.sample()
        first = (time.thread_time() - started) * 1000
        profile = cProfile.Profile() if args.profile else None
        times = []
        for _ in range(args.samples):
            time.sleep(1.0)
            if profile:
                profile.enable()
            started = time.thread_time()
            backend.sample()
            times.append((time.thread_time() - started) * 1000)
            if profile:
                profile.disable()
        backend.close()
    print(f"{count} stand-ins; first sample {first:.1f} ms CPU")
    print(
        f"next {len(times)} samples, thread CPU: median {statistics.median(times):.2f} ms, "
        f"min {min(times):.2f}, max {max(times):.2f}"
    )
    if profile:
        for key in ("tottime", "cumulative"):
            pstats.Stats(profile).strip_dirs().sort_stats(key).print_stats(args.top)


if __name__ == "__main__":
    main()
