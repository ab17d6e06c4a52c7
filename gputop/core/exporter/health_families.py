"""A card's health (docs/health.md) as metric families, under dcgm-exporter's names.

dcgm-exporter's ECC, retired-page, row-remap, PCIe-replay, NVLink CRC and last-Xid fields
keep their names, labels and meaning (gauges of the driver's counts, so ``increase()`` works
on them); gputop adds a counter per Xid code and the verdict (docs/exporter.md lists them).
A signal the card does not have is left out, never written as 0; a lost card gives its
verdict and Xids only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gputop.core.health import verdict
from gputop.core.model import GpuHealth, GpuSample
from gputop.core.xid import describe

T = TypeVar("T")
Reading = Callable[[T], "float | int | None"]


def gauges(
    table: Sequence[tuple[str, str, Reading[T]]],
    label_names: Sequence[str],
    series: Sequence[tuple[T, list[str]]],
) -> Iterator[Metric]:
    """One family per gauge; each series' reading where it is a finite number."""
    for name, help_text, reading in table:
        family = GaugeMetricFamily(name, help_text, labels=label_names)
        for source, labels in series:
            value = reading(source)
            if value is not None and math.isfinite(value):
                family.add_metric(labels, float(value))
        yield family


HEALTH_GAUGES: tuple[tuple[str, str, Reading[GpuHealth]], ...] = (
    (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "Corrected (single-bit) ECC errors since the driver loaded.",
        lambda h: h.ecc.corrected_volatile if h.ecc else None,
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "Corrected (single-bit) ECC errors over the board's life.",
        lambda h: h.ecc.corrected_aggregate if h.ecc else None,
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "Uncorrectable (double-bit) ECC errors over the board's life.",
        lambda h: h.ecc.uncorrected_aggregate if h.ecc else None,
    ),
    (
        "DCGM_FI_DEV_RETIRED_SBE",
        "Pages retired for multiple single-bit errors.",
        lambda h: h.retired_pages.single_bit if h.retired_pages else None,
    ),
    (
        "DCGM_FI_DEV_RETIRED_DBE",
        "Pages retired for a double-bit error.",
        lambda h: h.retired_pages.double_bit if h.retired_pages else None,
    ),
    (
        "DCGM_FI_DEV_RETIRED_PENDING",
        "1 when pages wait for the next reset to be retired.",
        lambda h: h.retired_pages.pending if h.retired_pages else None,
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "Rows remapped for correctable errors.",
        lambda h: h.remapped_rows.correctable if h.remapped_rows else None,
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "Rows remapped for uncorrectable errors.",
        lambda h: h.remapped_rows.uncorrectable if h.remapped_rows else None,
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "1 when a row remap waits for a GPU reset.",
        lambda h: h.remapped_rows.pending if h.remapped_rows else None,
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "1 when a row remap failed.",
        lambda h: h.remapped_rows.failed if h.remapped_rows else None,
    ),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "PCIe replays (retries) since the driver loaded.",
        lambda h: h.pcie_replays,
    ),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "NVLink CRC flit errors over the active links.",
        lambda h: h.nvlink_crc_errors,
    ),
)


def health_families(
    gpus: list[tuple[GpuSample, list[str]]], labels: tuple[str, ...]
) -> list[Metric]:
    """The health families of ``gpus``, each with its GPU labels (named ``labels``)."""
    read = [(gpu.health, values) for gpu, values in gpus if gpu.health is not None and not gpu.lost]
    families: list[Metric] = list(gauges(HEALTH_GAUGES, labels, read))
    last = GaugeMetricFamily(
        "DCGM_FI_DEV_XID_ERRORS",
        "The last Xid the driver reported (0: none since gputop started).",
        labels=(*labels, "err_code", "err_msg"),
    )
    counted = CounterMetricFamily(
        "gputop_gpu_xid_errors",
        "Xids the driver reported since gputop started, by code.",
        labels=(*labels, "xid"),
    )
    state = GaugeMetricFamily(
        "gputop_gpu_health", "The card's verdict: 0 ok, 1 warning, 2 critical.", labels=labels
    )
    for gpu, values in gpus:
        health = gpu.health
        if health is None:
            continue
        state.add_metric(values, float(verdict(health).value))
        if health.xid_events is None:
            continue  # no Xid source: unknown, not "none"
        if health.xid_events:
            code = health.xid_events[-1].xid
            last.add_metric([*values, str(code), describe(code).short], float(code))
        else:
            last.add_metric([*values, "", ""], 0.0)
        for code, count in health.xid_counts:
            counted.add_metric([*values, str(code)], float(count))
    families += [last, counted, state]
    return families
