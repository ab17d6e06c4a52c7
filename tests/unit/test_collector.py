"""The garbage collector settled once the dashboard has started (gputop/tui/collector.py).

In a child process: freezing is for the whole process, and this one runs other tests.
"""

from __future__ import annotations

import json
import subprocess
import sys

from gputop.tui.collector import YOUNG_THRESHOLD

CHILD = """
import gc, json
from gputop.tui.collector import settle_collector

class Node:
    def __init__(self):
        self.other = self

kept = [Node() for _ in range(100)]        # made at start-up and still in use
before = gc.get_threshold()
gc.disable()                              # as the dashboard starts (gputop/cli/dashboard.py)
settle_collector()
enabled = gc.isenabled()
frozen = gc.get_freeze_count()
for _ in range(50):                       # garbage made afterwards, in cycles
    Node()
collected = gc.collect()
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": frozen,
                  "collected": collected, "kept": len(kept), "enabled": enabled}))
"""


def test_settling_turns_the_collector_on_freezes_start_up_and_collects_later_cycles() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, timeout=60
    )
    found = json.loads(result.stdout)
    assert found["enabled"] is True  # off while the dashboard started, on once it has
    assert found["before"][0] == 700  # Python's default, untouched until then
    assert found["after"] == [YOUNG_THRESHOLD, found["before"][1], found["before"][2]]
    assert found["frozen"] >= 100  # the objects in use at that point, at least
    assert found["collected"] >= 50  # what became garbage later is still collected
    assert found["kept"] == 100
