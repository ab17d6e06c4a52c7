"""The fleet: every node a Prometheus server scrapes, in a few PromQL queries (docs/fleet.md)."""

TIMEOUT_S = 15.0
"""The fleet's one default ``--timeout`` (the dashboard's, ``snapshot``'s and ``pick``'s): the
most seconds one read of the fleet takes, every query and byte together. Here, not in read.py,
so the options' help says it without loading the fleet's modules."""
