"""CPU one refresh of host facts costs for 200 live processes (``HostProcessTable``).

Starts 200 real ``sleep`` processes, primes the table, and reports the median CPU time of
``describe()`` over 30 refreshes. A benchmark, not a test: its name keeps pytest from
collecting it.
"""

from __future__ import annotations

import statistics
import subprocess
import time

from gputop.core.sampling.host_processes import HostProcessTable

PROCESSES = 200
REFRESHES = 30


def main() -> None:
    children = [subprocess.Popen(["sleep", "600"]) for _ in range(PROCESSES)]
    try:
        pids = [child.pid for child in children]
        table = HostProcessTable()
        table.describe(pids)  # static facts, and the first CPU reading
        costs = []
        for _ in range(REFRESHES):
            started = time.process_time()
            facts = table.describe(pids)
            costs.append(time.process_time() - started)
        assert all(f.cpu_percent is not None for f in facts.values())
        median_ms = statistics.median(costs) * 1000
        print(f"describe({PROCESSES} live processes): {median_ms:.2f} ms CPU a refresh (median)")
    finally:
        for child in children:
            child.kill()
        for child in children:
            child.wait()


if __name__ == "__main__":
    main()
