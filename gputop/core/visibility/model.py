"""Results of the CUDA visibility rules: logical devices and the warnings a person needs."""

from __future__ import annotations

from gputop.core.errors import UsageError
from gputop.core.records import frozen


@frozen
class LogicalDevice:
    """``cuda:<logical_index>`` is this physical GPU, or one MIG instance of it."""

    logical_index: int
    physical_index: int
    uuid: str | None
    name: str | None
    mig_uuid: str | None = None


@frozen
class VisibilityWarning:
    code: str
    """Stable identifier: invalid-entry, duplicate, no-devices, fastest-first-differs, ..."""
    message: str


@frozen
class Visibility:
    cuda_visible_devices: str | None
    cuda_device_order: str | None
    devices: tuple[LogicalDevice, ...]
    warnings: tuple[VisibilityWarning, ...] = ()
    order_certain: bool = True
    """False when integer entries depend on the driver's undocumented fastest-first guess."""
    stopped_at: int | None = None
    """Position (0-based) of the entry that ended the list, if one did."""
    order_from_driver: bool = False
    """True when FASTEST_FIRST came from the driver probe rather than gputop's estimate."""
    devices_from_driver: bool = False
    """True when ``devices`` is the driver probe's enumeration, not the rules' prediction
    (gputop.core.probes.driver_mapping)."""


@frozen
class Pinning:
    """The environment that pins chosen cards, and what each becomes."""

    env: dict[str, str]
    devices: tuple[LogicalDevice, ...]
    """What the job will see: fewer than pinned where the driver exposes one MIG device."""
    warnings: tuple[str, ...] = ()
    """For the launch preview: pinned devices the driver would not expose."""


class SelectionError(UsageError):
    """A choice of cards that cannot be pinned (unknown, repeated, lost, MIG mode)."""
