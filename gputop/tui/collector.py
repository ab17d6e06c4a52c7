"""Python's garbage collector, tuned for a dashboard that runs for days (docs/speed.md).

Once the dashboard has started, what it made to start (Textual's modules, the widgets, the
styles: about 95,000 objects) lives as long as it does, yet every full collection walks it
all again; and the collector's youngest generation, at Python's 700 allocations, ran about
three times a second and walked each sample's objects while they were still in use. The
``gputop`` command starts its dashboard with the collector off (gputop/cli/dashboard.py).
After start-up ``settle_collector`` collects once, freezes what is left (the collector no
longer walks it; reference counting still frees it), turns the collector on and collects the
young generation after 10,000 allocations: a second's objects are mostly freed by then. Only
the ``gputop`` process does this, never a process that runs the app in tests, where later
apps' objects would be frozen with it.
"""

from __future__ import annotations

import gc

SETTLE_AFTER_S = 3.0
"""After the first frames and samples: what start-up made is made."""
YOUNG_THRESHOLD = 10_000
"""Allocations between collections of the youngest generation (Python's default: 700)."""


def settle_collector() -> None:
    """Collect once, freeze the survivors, and collect (again) the young generation less
    often."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    gc.enable()
