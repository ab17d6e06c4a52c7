"""The driver probe as the source of CUDA's default order, SM counts and PCI bus ids.

Every test runs the probe's real child process, which loads a ``libcuda.so.1`` compiled
from C at test time (tests/helpers/fake_libcuda.py) instead of NVIDIA's.
"""

from __future__ import annotations

import pytest
from helpers.fake_libcuda import build_fake_libcuda, devices_spec
from helpers.visibility_machines import codes, gpu, mixed

from gputop.core.model import GpuSample
from gputop.core.probes import DriverProbe, order_note, run_driver_probe
from gputop.core.probes.driver import DriverProbeResult
from gputop.core.visibility import resolve_visibility

TAIL = "-0000-0000-0000-000000000000"
RTX_PRO_4000 = f"GPU-40000000{TAIL}"
GB300 = f"GPU-b3000000{TAIL}"


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_fake_libcuda(tmp_path_factory.mktemp("libcuda"))


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FAKE_CUDA_DEVICES", "FAKE_CUDA_FAIL", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # the probe must unset it itself


def blackwell_box() -> tuple[GpuSample, ...]:
    """PCI order: RTX PRO 4000 (sm_120) then GB300 (sm_103); NVML gives no SM count."""
    return (
        gpu(0, RTX_PRO_4000, "NVIDIA RTX PRO 4000 Blackwell", (12, 0), None, 2617),  # type: ignore[arg-type]
        gpu(1, GB300, "NVIDIA GB300", (10, 3), None, 2032),  # type: ignore[arg-type]
    )


def use_devices(monkeypatch: pytest.MonkeyPatch, *devices: tuple[str, int, str]) -> None:
    monkeypatch.setenv("FAKE_CUDA_DEVICES", devices_spec(*devices))


def test_the_probe_reports_sm_count_and_pci_bus_id_per_ordinal(
    libcuda: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_devices(monkeypatch, (GB300, 160, "0000:41:00.0"), (RTX_PRO_4000, 70, "0000:01:00.0"))
    result = run_driver_probe(None, None, library=libcuda)
    assert result.status == "ok"
    assert [(d.uuid, d.multiprocessor_count, d.pci_bus_id) for d in result.devices] == [
        (GB300, 160, "0000:41:00.0"),
        (RTX_PRO_4000, 70, "0000:01:00.0"),
    ]


def test_the_default_order_probe_unsets_an_inherited_cuda_device_order(
    libcuda: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_devices(monkeypatch, (GB300, 160, "0000:41:00.0"), (RTX_PRO_4000, 70, "0000:01:00.0"))
    result = DriverProbe(library=libcuda).default_order()
    assert result.uuids == (GB300, RTX_PRO_4000)


def test_a_failing_attribute_call_loses_only_the_sm_count(
    libcuda: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CUDA_FAIL", "cuDeviceGetAttribute:1")
    result = run_driver_probe(None, None, library=libcuda)
    assert result.status == "ok"
    assert {d.multiprocessor_count for d in result.devices} == {None}
    assert result.devices[0].pci_bus_id == "0000:10:00.0"


def test_the_drivers_order_puts_gb300_first_where_compute_capability_would_not(
    libcuda: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_devices(monkeypatch, (GB300, 160, "0000:41:00.0"), (RTX_PRO_4000, 70, "0000:01:00.0"))
    default = DriverProbe(library=libcuda).default_order()
    visibility = resolve_visibility(
        blackwell_box(), "580.65.06", "0", None, driver_order=default.uuids
    )
    assert [d.uuid for d in visibility.devices] == [GB300]
    assert visibility.order_from_driver and visibility.order_certain
    assert order_note(visibility, default)[0] == "driver"


def test_the_drivers_order_of_a_mixed_box_is_used_for_integer_entries(
    libcuda: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = mixed()  # PCI order: 3060, A100, T4, H100
    driver_numbering = [box[2], box[0], box[3], box[1]]  # deliberately not the estimate
    use_devices(monkeypatch, *((g.uuid or "", 40, g.pci_bus_id or "") for g in driver_numbering))
    default = DriverProbe(library=libcuda).default_order()
    visibility = resolve_visibility(box, "550.54.15", "0,1", None, driver_order=default.uuids)
    assert [d.physical_index for d in visibility.devices] == [2, 0]
    (warning,) = [w for w in visibility.warnings if w.code == "fastest-first-differs"]
    assert "the CUDA driver's own order" in warning.message
    assert "estimate" not in warning.message


def test_without_the_probe_the_order_is_an_estimate_and_says_why(
    libcuda: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CUDA_FAIL", "cuInit:803")
    default = DriverProbe(library=libcuda).default_order()
    visibility = resolve_visibility(blackwell_box(), "580.65.06", "0", None, driver_order=None)
    source, message = order_note(visibility, default)
    assert source == "estimate"
    assert "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" in message
    assert "may be wrong" in message
    assert "fastest-first-uncertain" in codes(visibility)


def test_a_driver_list_missing_a_whole_gpu_is_not_taken_as_the_order(
    libcuda: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_devices(monkeypatch, (GB300, 160, "0000:41:00.0"))
    default = DriverProbe(library=libcuda).default_order()
    visibility = resolve_visibility(
        blackwell_box(), "580.65.06", None, None, driver_order=default.uuids
    )
    assert not visibility.order_from_driver
    assert "does not match" in order_note(visibility, default)[1]


@pytest.mark.parametrize(
    ("code", "name", "words"),
    [
        (3, "CUDA_ERROR_NOT_INITIALIZED", "not initialised"),
        (34, "CUDA_ERROR_STUB_LIBRARY", "stub"),
        (35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "older than"),
        (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "different versions"),
        (804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward-compatibility"),
    ],
)
def test_driver_errors_are_named_in_words(
    libcuda: str, monkeypatch: pytest.MonkeyPatch, code: int, name: str, words: str
) -> None:
    monkeypatch.setenv("FAKE_CUDA_FAIL", f"cuInit:{code}")
    result = run_driver_probe(None, None, library=libcuda)
    assert result.status == "error" and result.error_code == code
    assert result.detail.startswith(f"cuInit returned {name} ({code}): ")
    assert words in result.detail


def test_no_device_is_a_status_named_by_its_code(
    libcuda: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CUDA_FAIL", "cuDeviceGetCount:100")
    result = run_driver_probe(None, None, library=libcuda)
    assert (result.status, result.error_code) == ("no-device", 100)


def test_an_unlisted_error_code_keeps_its_number(
    libcuda: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CUDA_FAIL", "cuDeviceGetCount:999")
    result = run_driver_probe(None, None, library=libcuda)
    assert result.detail == "cuDeviceGetCount returned CUDA error 999"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_failed_probe_is_asked_again_after_the_retry_time(
    libcuda: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    probe = DriverProbe(library=libcuda, retry_after_s=60.0, clock=clock)
    monkeypatch.setenv("FAKE_CUDA_FAIL", "cuInit:803")
    failed = probe.default_order()
    assert failed.status == "error"
    monkeypatch.delenv("FAKE_CUDA_FAIL")  # the driver is fixed (a reboot, say)
    clock.now += 59.0
    assert probe.default_order() is failed
    clock.now += 2.0
    assert probe.default_order().status == "ok"


def test_a_successful_probe_is_kept(libcuda: str, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    probe = DriverProbe(library=libcuda, retry_after_s=60.0, clock=clock)
    first = probe.default_order()
    monkeypatch.setenv("FAKE_CUDA_FAIL", "cuInit:803")
    clock.now += 3600.0
    assert probe.default_order() is first


def test_an_unasked_driver_is_an_estimate_too() -> None:
    visibility = resolve_visibility(mixed(), "550.54.15", None, None)
    source, message = order_note(visibility, None)
    assert source == "estimate" and "the driver was not asked" in message


def test_a_probe_result_without_devices_is_not_an_order() -> None:
    visibility = resolve_visibility(
        mixed(), "550.54.15", None, None, driver_order=DriverProbeResult("ok").uuids
    )
    assert not visibility.order_from_driver
