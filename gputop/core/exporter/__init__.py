"""``gputop exporter``: the one sampler's snapshots as Prometheus metrics (docs/exporter.md).

``collector`` hands the newest snapshot's families (families.py) to each scrape: nothing
here samples per scrape, and nothing imports Textual. ``gputop report --prometheus`` reads
such metrics back (core/history/prometheus_report.py).
"""
