"""Where one busy sample's CPU goes: ``NvmlBackend.sample()`` on the busy server (issue 44)
with its 200 live stand-ins, in-process, at 1-s intervals.

    python tests/bench/sampler_profile.py [--samples 30] [--profile]
    python tests/bench/sampler_profile.py --instructions [--samples 20] [--tree DIR]

Prints the thread CPU time of each sample (median, minimum) and, with ``--profile``, the
cProfile of the samples after the first, by tottime and by cumtime. ``--instructions``
counts instructions instead, which do not move with the machine's load (as
``frame_instructions.py`` does for frames): the simulated clock frozen and stepped by one
second a sample, the same stand-ins' ``/proc`` read, under ``valgrind --tool=cachegrind``,
once with one sample and once with ``--samples`` more; the difference over the extra
samples is one sample's cost. ``--tree DIR`` counts another checkout's sampler.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

from busy_instructions import count_run, settle_collector  # noqa: E402
from busy_scenario import busy  # noqa: E402
from stand_ins import live_scenario  # noqa: E402

SCENARIO = REPO / "gputop" / "core" / "fake" / "scenarios" / "dgx-h100.json"
FROZEN_AT_S = "1000"


def _count_samples(tree: Path, scenario: Path, samples: int) -> None:
    """``1 + samples`` samples of ``tree``'s sampler on a frozen clock, a second apart."""
    sys.path.insert(0, str(tree))
    for name in [name for name in sys.modules if name.startswith("gputop")]:
        del sys.modules[name]  # this file imported its own checkout's: the tree's instead
    from gputop.core import settings
    from gputop.core.sampling.source import open_backend

    backend = open_backend(str(scenario), environ={settings.FAKE_TIME.name: FROZEN_AT_S})
    settle_collector()  # as the running dashboard's, whose thread samples
    for _ in range(1 + samples):
        backend.nvml.set_time(backend.nvml.now() + 1.0)
        backend.sample()
    backend.close()


def count_instructions(tree: Path, samples: int) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("sampler_profile: --instructions needs valgrind")
    with live_scenario(SCENARIO, busy) as (scenario, count):
        few, _ = count_run(__file__, "--samples-of", tree, scenario, 0)
        many, _ = count_run(__file__, "--samples-of", tree, scenario, samples)
    print(
        f"{tree}: {(many - few) / samples / 1e6:.1f}M instructions a busy sample "
        f"({count} stand-ins, {samples} samples)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--tree", type=Path, default=REPO, help="a checkout of gputop")
    parser.add_argument("--samples-of", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.samples_of:
        tree, scenario, samples = args.samples_of
        _count_samples(Path(tree), Path(scenario), int(samples))
        return
    if args.instructions:
        count_instructions(args.tree.resolve(), args.samples)
        return
    from gputop.core.sampling.source import open_backend

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
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
