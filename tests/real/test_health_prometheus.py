"""GPU health in the exporter (issue 42), scraped by a real Prometheus and checked by promtool.

A V100 with pages pending retirement, an A100 with a row remap pending and a storm of
10,000 Xid 13 (drained 4,096 a sample), and a GeForce card without ECC: each signal is
served under dcgm-exporter's name where the card has it and absent where it does not; the
Xid counter reaches the storm's exact count. See docs/exporter.md and docs/health.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.prometheus import (
    Prometheus,
    promtool_problems,
    running_exporter,
    running_prometheus,
    wait_for,
)
from helpers.scenarios import minimal_gpu

STORM = 10_000


def write_scenario(directory: Path) -> str:
    gpus = [
        minimal_gpu(
            name="Tesla V100-SXM2-16GB",
            uuid="GPU-10000000-0000-4000-8000-000000000000",
            pci_bus_id="00000000:07:00.0",
            cuda_compute_capability=[7, 0],
            ecc_uncorrected_volatile=0,
            ecc_corrected_volatile=3,
            retired_pages={"single_bit": 2, "double_bit": 1, "pending": True},
        ),
        minimal_gpu(
            uuid="GPU-20000000-0000-4000-8000-000000000000",
            pci_bus_id="00000000:08:00.0",
            ecc_uncorrected_volatile=0,
            remapped_rows={"correctable": 4, "uncorrectable": 0, "pending": True},
            nvlink_count=12,
            nvlink_crc_errors=7,
            pcie_replays=9,
            xid_events=[{"at_s": 1, "xid": 13, "count": STORM}, {"at_s": 2, "xid": 79}],
        ),
        minimal_gpu(
            name="NVIDIA GeForce RTX 4090",
            uuid="GPU-30000000-0000-4000-8000-000000000000",
            pci_bus_id="00000000:09:00.0",
            cuda_compute_capability=[8, 9],
        ),
    ]
    path = directory / "health.json"
    path.write_text(json.dumps({"hostname": "ward-1", "gpus": gpus}), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Prometheus]]:
    scenario = write_scenario(tmp_path_factory.mktemp("health"))
    args = ("--fake", scenario, "--listen", "127.0.0.1:0", "--interval", "1")
    with running_exporter(*args) as exporter:
        target = exporter.url.removeprefix("http://").removesuffix("/metrics")
        with running_prometheus(tmp_path_factory.mktemp("prometheus"), target) as prometheus:
            wait_for(
                lambda: prometheus.query(f'gputop_gpu_xid_errors_total{{xid="13"}} == {STORM}'),
                "Prometheus to scrape the whole Xid storm",
                timeout_s=60,
            )
            yield exporter.scrape(), prometheus


def by_gpu(result: list[dict[str, Any]]) -> dict[str, float]:
    return {item["metric"]["gpu"]: float(item["value"][1]) for item in result}


def test_each_signal_is_served_where_the_card_has_it_and_absent_where_not(
    served: tuple[str, Prometheus],
) -> None:
    _, prometheus = served

    def query(name: str) -> dict[str, float]:
        return by_gpu(prometheus.query(name))

    assert query("DCGM_FI_DEV_RETIRED_SBE") == {"0": 2.0}
    assert query("DCGM_FI_DEV_RETIRED_DBE") == {"0": 1.0}
    assert query("DCGM_FI_DEV_RETIRED_PENDING") == {"0": 1.0}
    assert query("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS") == {"1": 4.0}
    assert query("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS") == {"1": 0.0}
    assert query("DCGM_FI_DEV_ROW_REMAP_PENDING") == {"1": 1.0}
    assert query("DCGM_FI_DEV_ROW_REMAP_FAILURE") == {"1": 0.0}
    assert query("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL") == {"0": 3.0, "1": 0.0}
    assert query("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL") == {"0": 3.0, "1": 0.0}
    assert query("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL") == {"0": 0.0, "1": 0.0}
    assert query("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL") == {"0": 0.0, "1": 0.0}
    assert query("DCGM_FI_DEV_PCIE_REPLAY_COUNTER") == {"0": 0.0, "1": 9.0, "2": 0.0}
    assert query("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL") == {"1": 7.0}
    assert query("gputop_gpu_health") == {"0": 1.0, "1": 2.0, "2": 0.0}
    (last,) = prometheus.query("DCGM_FI_DEV_XID_ERRORS == 79")
    assert last["metric"]["gpu"] == "1" and last["metric"]["err_code"] == "79"
    assert last["metric"]["err_msg"] == "fell off the bus"
    counts = {
        (item["metric"]["gpu"], item["metric"]["xid"]): float(item["value"][1])
        for item in prometheus.query("gputop_gpu_xid_errors_total")
    }
    assert counts == {("1", "13"): float(STORM), ("1", "79"): 1.0}


def test_promtool_finds_nothing_wrong_with_the_health_exposition(
    served: tuple[str, Prometheus],
) -> None:
    exposition, _ = served
    assert "DCGM_FI_DEV_ROW_REMAP_PENDING" in exposition
    assert "# TYPE gputop_gpu_xid_errors_total counter" in exposition
    assert promtool_problems(exposition) == []  # but for dcgm-exporter's own names' lints
