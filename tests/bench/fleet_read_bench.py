"""What one read of the fleet costs gputop in CPU (issue 41's dashboard at 5-s scrapes reads
every 5 s): ``read_fleet`` in this process against a real Prometheus (Debian's) scraping
``--nodes`` simulated nodes (tests/bench/fleet_bench.py's fleet), and its parts: each
query's answer fetched and decoded (one after another, so that each is timed alone), then
the fleet built from them (``build_fleet``).

Run: ``.venv/bin/python tests/bench/fleet_read_bench.py [--nodes 200] [--reads 15]
[--dashboard]`` (``--dashboard``: the dashboard's read, without the cards' temperature,
power and activity). Process CPU time (``time.process_time``), median (min-max) of
``--reads``; on a shared machine CPU time moves less than wall time, and the parts are
measured in turns within one run, so their ratios hold. A benchmark, not a test: its name
keeps pytest away.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests"), str(Path(__file__).resolve().parent)]

from fleet_bench import nodes  # noqa: E402
from helpers.fleet import fleet_prometheus, simulated_nodes  # noqa: E402
from helpers.waiting import wait_for  # noqa: E402

from gputop.core.fleet import model  # noqa: E402
from gputop.core.fleet.queries import refresh_queries  # noqa: E402
from gputop.core.fleet.read import read_fleet  # noqa: E402
from gputop.core.prometheus.auth import server_for  # noqa: E402
from gputop.core.prometheus.client import Budget, query  # noqa: E402


def shown(figures: list[float]) -> str:
    return (
        f"{statistics.median(figures) * 1000:6.1f} ms "
        f"({min(figures) * 1000:.1f}-{max(figures) * 1000:.1f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--interval", type=float, default=5.0, help="scrape interval (s)")
    parser.add_argument("--reads", type=int, default=15)
    parser.add_argument(
        "--dashboard",
        action="store_true",
        help="the dashboard's read: not the cards' temperature, power and activity",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        with (
            simulated_nodes(directory, nodes(args.nodes)) as targets,
            fleet_prometheus(directory / "prometheus", targets, args.interval) as prometheus,
        ):
            wait_for(
                lambda: (
                    len(prometheus.query('count_over_time(up{job="nodes"}[10m]) >= 3'))
                    == len(targets)
                ),
                "every node scraped three times",
                args.interval * 6 + 120,
            )
            server = server_for(prometheus.url)
            queries = refresh_queries("", every_figure=not args.dashboard)
            whole: list[float] = []
            parts: dict[str, list[float]] = {name: [] for name in queries}
            built: list[float] = []
            gc.disable()  # the dashboard settles its collector (gputop/tui/collector.py)
            fleet = None
            for _ in range(args.reads):
                started = time.process_time()
                fleet = read_fleet(server, timeout_s=60.0, every_figure=not args.dashboard)
                whole.append(time.process_time() - started)
                budget = Budget(60.0, what="refresh")
                answers = {}
                for name, promql in queries.items():
                    started = time.process_time()
                    answers[name] = query(server, promql, budget)
                    parts[name].append(time.process_time() - started)
                now = max(s.time for s in answers["up"] if s.time is not None)
                started = time.process_time()
                model.build_fleet("u", now, answers, len(queries))
                built.append(time.process_time() - started)
                gc.collect()
            gc.enable()
    decode = [sum(each) for each in zip(*parts.values(), strict=True)]
    assert fleet is not None
    print(f"{args.nodes} nodes, {len(fleet.nodes)} read, {fleet.gpu_count} GPUs; CPU a read:")
    print(f"  read_fleet, whole      {shown(whole)}")
    print(f"  the {len(parts)} answers decoded  {shown(decode)}")
    for name, figures in parts.items():
        print(f"    {name:<20} {shown(figures)}")
    print(f"  build_fleet            {shown(built)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
