"""The sparkline history: one point per moment, kept per card."""

from __future__ import annotations

from gputop.core.model import GpuSample, Snapshot
from gputop.core.sampling.history import UtilizationHistory


def snapshot_at(timestamp: float, utilization: int | None) -> Snapshot:
    gpu = GpuSample(
        physical_index=0,
        uuid="GPU-00000000-0000-0000-0000-000000000000",
        name="Test GPU",
        pci_bus_id="00000000:01:00.0",
        utilization_gpu_percent=utilization,
    )
    return Snapshot("host", None, None, None, timestamp, (gpu,))


def test_each_new_moment_adds_a_point() -> None:
    history = UtilizationHistory(length=10)
    history.add(snapshot_at(1.0, 10))
    history.add(snapshot_at(2.0, 20))
    assert history.series("GPU-00000000-0000-0000-0000-000000000000", 0) == (10, 20)


def test_the_same_moment_again_adds_nothing() -> None:
    """A frozen simulated clock gives the same snapshot every tick: the history must not scroll."""
    history = UtilizationHistory(length=10)
    history.add(snapshot_at(1.0, 10))
    history.add(snapshot_at(1.0, 10))
    assert history.series("GPU-00000000-0000-0000-0000-000000000000", 0) == (10,)


def test_a_lost_reading_is_kept_as_a_gap() -> None:
    history = UtilizationHistory(length=10)
    history.add(snapshot_at(1.0, 10))
    history.add(snapshot_at(2.0, None))
    assert history.series("GPU-00000000-0000-0000-0000-000000000000", 0) == (10, None)
