"""The fleet: every node a Prometheus server scrapes, in a few PromQL queries (docs/fleet.md)."""
