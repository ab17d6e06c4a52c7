"""The sparkline history: one point per bucket of time, kept per card."""

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
    history = UtilizationHistory(length=10, bucket_s=1.0)
    history.add(snapshot_at(1.0, 10))
    history.add(snapshot_at(2.0, 20))
    history.add(snapshot_at(3.0, 30))
    assert history.series("GPU-00000000-0000-0000-0000-000000000000", 0) == (10, 20)


def test_the_same_moment_again_adds_nothing() -> None:
    """A frozen simulated clock gives the same snapshot every tick: the history must not scroll."""
    history = UtilizationHistory(length=10, bucket_s=1.0)
    history.add(snapshot_at(1.0, 10))
    history.add(snapshot_at(1.0, 10))
    history.add(snapshot_at(2.0, 20))
    assert history.series("GPU-00000000-0000-0000-0000-000000000000", 0) == (10,)


def test_a_lost_reading_is_kept_as_a_gap() -> None:
    history = UtilizationHistory(length=10, bucket_s=1.0)
    history.add(snapshot_at(1.0, 10))
    history.add(snapshot_at(2.0, None))
    history.add(snapshot_at(3.0, 30))
    assert history.series("GPU-00000000-0000-0000-0000-000000000000", 0) == (10, None)


UUID = "GPU-00000000-0000-0000-0000-000000000000"


def test_a_point_is_the_mean_of_its_bucket_shown_once_the_bucket_is_complete() -> None:
    history = UtilizationHistory(length=10, bucket_s=2.0)
    history.add(snapshot_at(10.0, 10))
    history.add(snapshot_at(11.0, 30))
    assert history.series(UUID, 0) == ()  # the bucket [10, 12) is still open
    history.add(snapshot_at(12.0, 90))
    assert history.series(UUID, 0) == (20,)


def test_a_bucket_of_only_unknown_readings_is_a_gap() -> None:
    history = UtilizationHistory(length=10, bucket_s=2.0)
    history.add(snapshot_at(10.0, None))
    history.add(snapshot_at(11.0, None))
    history.add(snapshot_at(12.0, 50))
    assert history.series(UUID, 0) == (None,)


def test_seeded_seconds_are_bucketed_like_live_ones() -> None:
    history = UtilizationHistory(length=10, bucket_s=2.0)
    history.seed({UUID: (10, 20, 30, 40, 50)}, now=16.0)  # readings at 11, 12, ..., 15 s
    assert history.series(UUID, 0) == (10, 25)  # [10,12) [12,14); [14,16) still open
    history.add(snapshot_at(16.0, 0))
    assert history.series(UUID, 0) == (10, 25, 45)


def test_a_colour_rises_at_once_and_falls_only_clearly_below_its_threshold() -> None:
    from gputop.tui.render import sticky_level_style

    assert sticky_level_style(91, "green") == "bold red"
    assert sticky_level_style(88, "bold red") == "bold red"  # jitter around 90 keeps it
    assert sticky_level_style(84, "bold red") == "yellow"
    assert sticky_level_style(68, "yellow") == "yellow"
    assert sticky_level_style(40, "yellow") == "green"
    assert sticky_level_style(None, "bold red") == "dim"


def test_a_refill_fills_the_past_and_keeps_this_runs_points() -> None:
    """Seeded at t=10 from a store that had only t=0-5; live readings from t=10; the store
    read again has t=0-10: the hole fills, the live points stay as they were."""
    uuid = "GPU-00000000-0000-0000-0000-000000000000"
    history = UtilizationHistory(length=20, bucket_s=1.0)
    history.seed({uuid: (50, 50, 50, 50, 50, None, None, None, None, None)}, now=10.0)
    for t in range(10, 14):
        history.add(snapshot_at(float(t), 90))
    assert history.series(uuid, 0) == (50, 50, 50, 50, 50, None, None, None, None, None, 90, 90, 90)
    history.refill({uuid: (50,) * 8 + (None, 60)})
    assert history.series(uuid, 0) == (50,) * 8 + (None, 60, 90, 90, 90)


def test_a_refill_never_blanks_a_point_the_past_had() -> None:
    """Where the store read again knows nothing (None), the point seeded before stays."""
    uuid = "GPU-00000000-0000-0000-0000-000000000000"
    history = UtilizationHistory(length=20, bucket_s=1.0)
    history.seed({uuid: (40, 40, 40, 40)}, now=4.0)
    history.add(snapshot_at(4.0, 90))
    history.add(snapshot_at(5.0, 90))
    history.refill({uuid: (None, None, 70, None)})
    assert history.series(uuid, 0) == (40, 40, 70, 40, 90)
