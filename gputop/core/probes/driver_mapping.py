"""The driver's answer is the mapping: its enumeration, placed on NVML's cards.

Where the driver probe has answered for an environment, what it enumerated is what a CUDA
program started with that environment gets; gputop's rules predict where the probe cannot
run, and explain the result. A disagreement is the rules' error, reported with both lists
(docs/cuda-visibility.md, "The driver probe").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from gputop.core.model import GpuSample
from gputop.core.probes.driver import DriverProbe, DriverProbeResult, uuid_key
from gputop.core.visibility import LogicalDevice, Visibility, resolve_visibility


def driver_visibility(
    rules: Visibility, probe: DriverProbeResult, gpus: Sequence[GpuSample]
) -> Visibility | None:
    """``rules`` with the driver's devices in place of the rules' ones; None where the probe
    did not answer or named a device NVML does not list (the rules' list stands then)."""
    if probe.status == "no-device":
        return replace(rules, devices=(), devices_from_driver=True)
    if probe.status != "ok":
        return None
    devices: list[LogicalDevice] = []
    for logical, uuid in enumerate(probe.uuids):
        found = _card(gpus, uuid)
        if found is None:
            return None
        gpu, mig_uuid = found
        devices.append(LogicalDevice(logical, gpu.physical_index, gpu.uuid, gpu.name, mig_uuid))
    return replace(rules, devices=tuple(devices), order_certain=True, devices_from_driver=True)


def rules_error(rules: Visibility, driver: Visibility) -> str | None:
    """The sentence that reports the rules' wrong prediction, or None where they agree."""
    predicted = [(d.physical_index, d.mig_uuid) for d in rules.devices]
    if predicted == [(d.physical_index, d.mig_uuid) for d in driver.devices]:
        return None
    return (
        "gputop's rules were wrong here: they predicted "
        + (_listed(rules) or "no device")
        + "; the CUDA driver enumerates "
        + (_listed(driver) or "no device")
        + ", and that is what a program gets."
    )


def _listed(visibility: Visibility) -> str:
    return ", ".join(
        f"cuda:{d.logical_index} → GPU {d.physical_index}" + (" (MIG)" if d.mig_uuid else "")
        for d in visibility.devices
    )


def _card(gpus: Sequence[GpuSample], uuid: str) -> tuple[GpuSample, str | None] | None:
    wanted = uuid_key(uuid)
    for gpu in gpus:
        if gpu.uuid and uuid_key(gpu.uuid) == wanted:
            return gpu, None
        for mig in gpu.mig_devices:
            if mig.uuid and uuid_key(mig.uuid) == wanted:
                return gpu, mig.uuid
    return None


def check_launch(
    gpus: Sequence[GpuSample],
    driver_version: str | None,
    env: Mapping[str, str],
    probe: DriverProbe,
) -> tuple[Visibility | None, str | None]:
    """What the driver enumerates under a launch's pinning, and the rules' error if they
    predicted otherwise; (None, None) where the driver cannot be asked."""
    visible, order = env.get("CUDA_VISIBLE_DEVICES"), env.get("CUDA_DEVICE_ORDER")
    rules = resolve_visibility(gpus, driver_version, visible, order)
    seen = driver_visibility(rules, probe.probe(visible, order), gpus)
    if seen is None:
        return None, None
    return seen, rules_error(rules, seen)
