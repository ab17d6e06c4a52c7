"""The real-GPU suite's health comparison (tests/gpu/health_compare.py) on ``nvidia-smi -q``
texts in the layouts of two driver branches, written from the field names of recorded dumps
(an A10 on 550.127.05, an A100 on 510.73.08; the pre-Ampere ``Single Bit``/``Double Bit``
sections), not recorded themselves: issue 42, docs/health.md."""

from __future__ import annotations

from typing import Any

from gpu import health_compare

AMPERE_550 = """
==============NVSMI LOG==============

Timestamp                                 : Tue Dec  1 19:00:00 2026
Driver Version                            : 550.127.05
CUDA Version                              : 12.4

Attached GPUs                             : 1
GPU 00000000:07:00.0
    ECC Mode
        Current                           : Enabled
        Pending                           : Enabled
    ECC Errors
        Volatile
            SRAM Correctable              : 1
            SRAM Uncorrectable Parity     : 0
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 4
            DRAM Uncorrectable            : 2
        Aggregate
            SRAM Correctable              : 3
            SRAM Uncorrectable Parity     : 0
            SRAM Uncorrectable SEC-DED    : 1
            DRAM Correctable              : 40
            DRAM Uncorrectable            : 2
            SRAM Threshold Exceeded       : No
        Aggregate Uncorrectable SRAM Sources
            SRAM L2                       : 0
            SRAM SM                       : 1
    Retired Pages
        Single Bit ECC                    : N/A
        Double Bit ECC                    : N/A
        Pending Page Blacklist            : N/A
    Remapped Rows
        Correctable Error                 : 1
        Uncorrectable Error               : 2
        Pending                           : Yes
        Remapping Failure Occurred        : No
        Bank Remap Availability Histogram
            Max                           : 639 bank(s)
            High                          : 1 bank(s)
"""

VOLTA = """
Attached GPUs                             : 1
GPU 00000000:3B:00.0
    ECC Errors
        Volatile
            Single Bit
                Device Memory             : 3
                Register File             : 0
                Total                     : 3
            Double Bit
                Device Memory             : 0
                Total                     : 0
        Aggregate
            Single Bit
                Total                     : 12
            Double Bit
                Total                     : 1
    Retired Pages
        Single Bit ECC                    : 2
        Double Bit ECC                    : 1
        Pending Page Blacklist            : Yes
"""


def gpu(bus: str, **health: Any) -> dict[str, Any]:
    return {"index": 0, "pci_bus_id": bus, "health": health}


def test_an_ampere_layout_gives_the_totals_nvml_gives() -> None:
    (fields,) = health_compare.parse_query(AMPERE_550).values()
    said = health_compare.smi_health(fields)
    assert said["ecc_errors.corrected_volatile"] == 5
    assert said["ecc_errors.uncorrected_volatile"] == 2
    assert said["ecc_errors.corrected_aggregate"] == 43
    assert said["ecc_errors.uncorrected_aggregate"] == 3
    assert said["retired_pages.single_bit"] is None and said["retired_pages.pending"] is None
    assert said["remapped_rows.correctable"] == 1 and said["remapped_rows.pending"] is True
    assert said["remapped_rows.failed"] is False


def test_gputop_agreeing_passes_and_disagreeing_fails() -> None:
    agreeing = gpu(
        "00000000:07:00.0",
        ecc_errors={"corrected_volatile": 5, "uncorrected_volatile": 2,
                    "corrected_aggregate": 43, "uncorrected_aggregate": 3},
        retired_pages=None,
        remapped_rows={"correctable": 1, "uncorrectable": 2, "pending": True, "failed": False},
    )  # fmt: skip
    comparisons = health_compare.compare_health({"gpus": [agreeing]}, AMPERE_550, AMPERE_550)
    assert comparisons and all(c.ok for c in comparisons), [c.to_json() for c in comparisons]
    wrong = gpu("00000000:07:00.0", ecc_errors=None, retired_pages={"single_bit": 0},
                remapped_rows={"correctable": 1, "uncorrectable": 2, "pending": False})  # fmt: skip
    failed = {c.what for c in health_compare.compare_health({"gpus": [wrong]}, AMPERE_550,
                                                             AMPERE_550) if not c.ok}  # fmt: skip
    assert "GPU 0 ecc_errors.uncorrected_volatile" in failed
    assert "GPU 0 retired_pages.single_bit" in failed  # gputop has one where nvidia-smi has N/A
    assert "GPU 0 remapped_rows.pending" in failed


def test_a_volta_layout_and_a_counter_that_rose_between_the_reads() -> None:
    (fields,) = health_compare.parse_query(VOLTA).values()
    said = health_compare.smi_health(fields)
    assert said["ecc_errors.corrected_volatile"] == 3
    assert said["ecc_errors.uncorrected_aggregate"] == 1
    assert said["retired_pages.single_bit"] == 2 and said["retired_pages.pending"] is True
    assert said["remapped_rows.correctable"] is None
    later = VOLTA.replace("Total                     : 3", "Total                     : 5", 1)
    ours = gpu(
        "00000000:3B:00.0",
        ecc_errors={"corrected_volatile": 4, "uncorrected_volatile": 0,
                    "corrected_aggregate": 12, "uncorrected_aggregate": 1},
        retired_pages={"single_bit": 2, "double_bit": 1, "pending": True},
        remapped_rows=None,
    )  # fmt: skip
    comparisons = health_compare.compare_health({"gpus": [ours]}, VOLTA, later)
    assert all(c.ok for c in comparisons), [c.to_json() for c in comparisons if not c.ok]


def test_a_gpu_nvidia_smi_does_not_list_fails() -> None:
    (only,) = health_compare.compare_health({"gpus": [gpu("00000000:99:00.0")]}, VOLTA, VOLTA)
    assert not only.ok and "does not list" in only.note
