"""The PromQL of one fleet refresh: a fixed handful of instant queries, whatever the node
count (every series of a kind in one answer, never a query per node; docs/fleet.md).

``--match SELECTOR`` (``{cluster="a"}``) narrows every one of them: its matchers are added to
each selector, so a refresh reads only those nodes' series.
"""

from __future__ import annotations

import json
import re

from gputop.core.errors import UsageError

ACTIVITY = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "graphics_percent",
    "DCGM_FI_PROF_SM_ACTIVE": "sm_active_percent",
    "DCGM_FI_PROF_SM_OCCUPANCY": "sm_occupancy_percent",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active_percent",
    "DCGM_FI_PROF_DRAM_ACTIVE": "dram_active_percent",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": "fp64_percent",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": "fp32_percent",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": "fp16_percent",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "pcie_tx_bytes_per_s",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "pcie_rx_bytes_per_s",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "nvlink_rx_bytes_per_s",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "nvlink_tx_bytes_per_s",
}
"""dcgm-exporter's profiling series (ratios 0-1, or bytes/s) -> ``snapshot --json``'s keys."""
HEALTH_FLAGS = {
    "DCGM_FI_DEV_ROW_REMAP_PENDING": "row_remap_pending",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "row_remap_failed",
    "DCGM_FI_DEV_RETIRED_PENDING": "retired_pages_pending",
}
"""dcgm-exporter's health flags (1 or 0) the verdict reads -> the fleet's ``health`` keys;
with ``DCGM_FI_DEV_XID_ERRORS``, ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`` and gputop's
``gputop_gpu_health``, in the cards' one query (docs/health.md, docs/fleet.md)."""
CARD_METRICS = (
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    *HEALTH_FLAGS,
    *ACTIVITY,
    "gputop_gpu_lost",
    "gputop_gpu_sample_error",
    "gputop_gpu_no_access",
    "gputop_gpu_processes",
    "gputop_gpu_idle_held_memory_bytes",
    "gputop_gpu_claimed",
    "gputop_gpu_health",
)
DETAIL_METRICS = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", *ACTIVITY)
"""A card's figures the fleet dashboard's table does not show (its node's screen does):
the dashboard reads them for one node when it is opened, not every refresh for every card
(``refresh_queries(every_figure=False)``, ``node_figures_query``), as it does the processes
(``PROCESS_METRICS``: the table's free rule counts them by ``gputop_gpu_processes``)."""
CARD_KEY = "__name__, job, instance, UUID, gpu, user"
"""What tells one card's series apart (``user``: a claim's holder)."""
SHOWN_CARD_LABELS = (
    "__name__, job, instance, UUID, gpu, Hostname, modelName, pod, namespace, container"
)
"""Each card's labels the dashboard shows (its PCI bus id and driver version are in the JSON
only; a node's target labels come with ``up``)."""
PROCESS_METRICS = ("gputop_process_memory_used_bytes", "gputop_process_sm_util_percent")
LAST_SAMPLE = "gputop_last_sample_timestamp_seconds"
"""gputop's exporter's newest sample (a stuck sampler's node is stale): read with each card's
labels, among the first answers, so the first frame's states are right."""
USER_MEMORY = "gputop_user_memory_used_bytes"
USER_COUNTS = ("gputop_user_idle_held_memory_bytes", "gputop_user_gpus")
"""What the users' view (``u``) shows beside their memory: the dashboard's refresh does not
read them (its table shows only the users' memory; two thirds of that answer), they are
read when the view opens (``user_counts_query``); ``snapshot`` and ``pick`` read them."""
NODE_METRICS = (USER_MEMORY, *USER_COUNTS)
"""The users' figures the fleet shows (``gputop_user_processes`` is none of them: not read,
a quarter of that answer less)."""
LAST_SEEN_WINDOW = "1h"
LAST_SEEN_STEP = "15s"
INTERVAL_WINDOW_S = 120
"""Scrapes counted to estimate each target's scrape interval."""

_VALUE = r'"(?:[^"\\]|\\.)*"'
_MATCHER = rf"\s*[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*{_VALUE}\s*"
_SELECTOR = re.compile(rf"\{{(?:{_MATCHER}(?:,{_MATCHER})*,?)?\s*\}}")
MAX_SELECTOR_CHARS = 2000


def check_selector(selector: str | None) -> str:
    """The matchers of ``--match`` (``{a="b", c=~"d.*"}`` -> ``a="b", c=~"d.*"``), or a
    ``UsageError``; ``""`` for none."""
    if selector is None:
        return ""
    if len(selector) > MAX_SELECTOR_CHARS or _SELECTOR.fullmatch(selector.strip()) is None:
        raise UsageError(
            f"--match {selector[:80]!r}: give a series selector's label matchers in braces, "
            'e.g. --match \'{cluster="a"}\' or \'{job=~"gpu.*", rack!="r9"}\'.'
        )
    return selector.strip()[1:-1].strip().rstrip(",").strip()


def promql_string(value: str) -> str | None:
    """``value`` as a PromQL string literal (double quotes, Go's escapes: JSON's are a
    subset of them); ``None`` for text no query can carry (not UTF-8: a lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def node_figures_query(matchers: str, job: str, instance: str) -> tuple[str, str] | None:
    """The figures of ``DETAIL_METRICS`` of one node's cards and its processes' series
    (its target's ``job`` and ``instance``, label values from the server, quoted here);
    ``None`` where a label value cannot be quoted."""
    quoted_job, quoted_instance = promql_string(job), promql_string(instance)
    if quoted_job is None or quoted_instance is None:
        return None
    only = f"job={quoted_job}, instance={quoted_instance}" + (f", {matchers}" if matchers else "")
    return (
        f'max by ({CARD_KEY}) ({{__name__=~"{"|".join(DETAIL_METRICS)}", GPU_I_ID="", {only}}})',
        f'{{__name__=~"{"|".join(PROCESS_METRICS)}", {only}}}',
    )


def user_counts_query(matchers: str) -> str:
    """The users' ``USER_COUNTS`` on every node, for the users' view of the dashboard."""
    extra = f", {matchers}" if matchers else ""
    return f'{{__name__=~"{"|".join(USER_COUNTS)}"{extra}}}'


def refresh_queries(matchers: str, every_figure: bool = True) -> dict[str, str]:
    """The queries of one refresh, by name; ``matchers`` from ``check_selector``; without
    ``every_figure``, not the cards' ``DETAIL_METRICS``, the processes nor the users'
    ``USER_COUNTS`` (the dashboard's table)."""
    figures = [m for m in CARD_METRICS[1:] if every_figure or m not in DETAIL_METRICS]
    extra = f", {matchers}" if matchers else ""
    only = f"{{{matchers}}}" if matchers else ""
    queries = {
        "up": f"up{only}",
        "scraped": f"timestamp(up{only})",
        "scrapes": f"count_over_time(up{only}[{INTERVAL_WINDOW_S}s])",
        "last_up": f"max_over_time(timestamp(up{only} == 1)[{LAST_SEEN_WINDOW}:{LAST_SEEN_STEP}])",
        # Each card's labels once (its memory used carries them all, pods included) and
        # gputop's last sample; then every figure of every card with only the labels that
        # tell them apart: a quarter of the bytes, and of the decoding.
        "card_labels": f'{{__name__=~"DCGM_FI_DEV_FB_USED|{LAST_SAMPLE}", GPU_I_ID=""{extra}}}',
        "nodes": f'{{__name__=~"{"|".join(NODE_METRICS)}"{extra}}}',
        "cards": f'max by ({CARD_KEY}) ({{__name__=~"{"|".join(figures)}", GPU_I_ID=""{extra}}})',
        "processes": f'{{__name__=~"{"|".join(PROCESS_METRICS)}"{extra}}}',
    }
    if not every_figure:
        del queries["processes"]
        queries["nodes"] = f'{{__name__="{USER_MEMORY}"{extra}}}'
        # Only the labels the dashboard shows or needs: a third of the answer's bytes less.
        queries["card_labels"] = f"max by ({SHOWN_CARD_LABELS}) ({queries['card_labels']})"
    return queries
