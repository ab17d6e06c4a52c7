"""One client for a Prometheus server's HTTP API (and Thanos, VictoriaMetrics, Mimir, which
serve the same ``/api/v1`` API), shared by ``gputop report --prometheus`` and the fleet
(``snapshot``/``pick``/the dashboard with ``--prometheus``). See docs/fleet.md and
docs/security.md, "A hostile Prometheus".
"""
