"""The fleet dashboard (``gputop --prometheus URL``): every node a Prometheus scrapes, live
(docs/fleet.md)."""
