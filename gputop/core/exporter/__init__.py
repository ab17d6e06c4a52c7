"""``gputop exporter``: the one sampler's snapshots as Prometheus metrics (docs/exporter.md).

``processes`` bounds and sums each GPU's processes, ``jobs`` names the gputop or Slurm job of
a process, ``families`` turns one snapshot into metric families (dcgm-exporter's names for
what both export, ``gputop_`` for the rest), ``collector`` hands the newest snapshot's
families to each scrape, ``listen`` parses the address to serve on and ``server`` serves it.
Nothing here samples per scrape, and nothing imports Textual. ``gputop report --prometheus``
reads such metrics back: gputop/core/history/prometheus_report.py.
"""
