"""``gputop map``: which physical GPU each ``cuda:N`` is, by the CUDA driver's rules.

The rules answer on any machine; where the real driver can be asked (``libcuda``), a
short-lived probe gives the driver's own default numbering (both variables unset) and then
confirms or contradicts the rules, and the torch probe reports what the user's own
interpreter would see. Simulated GPUs are not known to the driver or torch, so with
``--fake`` only the rules answer and the fastest-first order is an estimate, said so.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from gputop.core.numbers import strict_json
from gputop.core.probes import (
    DriverProbe,
    DriverProbeResult,
    compare_with_rules,
    order_note,
    probe_torch,
)
from gputop.core.safe_text import clean
from gputop.core.sampling.source import FAKE_ENV, open_backend
from gputop.core.visibility import Visibility, resolve_visibility

CVD = "CUDA_VISIBLE_DEVICES"
ORDER = "CUDA_DEVICE_ORDER"


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "map",
        parents=[parent],
        help="show which physical GPU each cuda:N is",
        description="Show which physical GPU (nvidia-smi index) each cuda:N is, following the "
        "CUDA driver's rules for CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER.",
    )
    parser.add_argument(
        "--visible",
        metavar="VALUE",
        help=f"a {CVD} value to explain (default: this shell's; '' hides every GPU)",
    )
    parser.add_argument("--order", metavar="ORDER", help=f"a {ORDER} value (default: this shell's)")
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter whose torch to ask (default: the first python3 on PATH)",
    )
    parser.add_argument("--no-torch", action="store_true", help="skip the torch probe")
    parser.add_argument("--json", action="store_true", help="print JSON instead")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    visible = args.visible if args.visible is not None else os.environ.get(CVD)
    order = args.order if args.order is not None else os.environ.get(ORDER)
    simulated = bool(args.fake or os.environ.get(FAKE_ENV))
    backend = open_backend(args.fake)
    try:
        snapshot = backend.sample()
    finally:
        backend.close()
    driver = DriverProbe()
    default: DriverProbeResult | None = None
    if not simulated:
        default = driver.default_order()
    visibility = resolve_visibility(
        snapshot.gpus,
        snapshot.driver_version,
        visible,
        order,
        driver_order=default.uuids if default is not None and default.status == "ok" else None,
    )
    order_source, order_message = order_note(visibility, default)
    if simulated:
        verdict, driver_message = "unavailable", "not asked: these GPUs are simulated"
        order_message = order_message.replace(
            "the driver was not asked", "these GPUs are simulated"
        )
        torch: Any = None
        torch_message = "not asked: these GPUs are simulated"
    else:
        probe = driver.probe(visible, order)
        verdict, driver_message = compare_with_rules(visibility, probe)
        torch = None if args.no_torch else probe_torch(args.python, visible, order)
        torch_message = "skipped (--no-torch)" if torch is None else torch.message

    if args.json:
        document = _as_json(visibility, verdict, torch)
        document["order_source"] = order_source
        document["driver_devices"] = _driver_devices(default)
        print(strict_json(document, indent=2))
    else:
        print(_as_text(visibility, order_message, driver_message, torch_message))
    return 0


def _driver_devices(default: DriverProbeResult | None) -> list[dict[str, Any]] | None:
    """The driver's own numbering with SM count and PCI bus id; None where not probed."""
    if default is None or default.status != "ok":
        return None
    return [
        {
            "cuda_ordinal": ordinal,
            "uuid": device.uuid,
            "multiprocessor_count": device.multiprocessor_count,
            "pci_bus_id": device.pci_bus_id,
        }
        for ordinal, device in enumerate(default.devices)
    ]


def _as_text(
    visibility: Visibility, order_message: str, driver_message: str, torch_message: str
) -> str:
    lines = [
        f"{CVD}={_shown(visibility.cuda_visible_devices)}  "
        f"{ORDER}={_shown(visibility.cuda_device_order)}"
    ]
    if not visibility.devices:
        lines.append("No CUDA device is visible with this setting.")
    for device in visibility.devices:
        target = device.mig_uuid or device.uuid or "?"
        lines.append(
            f"cuda:{device.logical_index} → GPU {device.physical_index}  "
            f"{clean(device.name or '?')}  "
            f"{clean(target[:12] if device.mig_uuid is None else target)}"
        )
    for warning in visibility.warnings:
        lines.append(f"warning: {clean(warning.message)}")
    lines.append(clean(order_message))
    lines.append(f"driver: {clean(driver_message)}")
    lines.append(f"torch: {clean(torch_message)}")
    return "\n".join(lines)


def _shown(value: str | None) -> str:
    return (
        "(unset)"
        if value is None
        else repr(value)
        if value.strip() != value or not value
        else clean(value)
    )


def _as_json(visibility: Visibility, verdict: str, torch: Any) -> dict[str, Any]:
    return {
        "cuda_visible_devices": visibility.cuda_visible_devices,
        "cuda_device_order": visibility.cuda_device_order,
        "devices": [
            {
                "logical_index": device.logical_index,
                "physical_index": device.physical_index,
                "uuid": device.uuid,
                "name": device.name,
                "mig_uuid": device.mig_uuid,
            }
            for device in visibility.devices
        ],
        "warnings": [warning.message for warning in visibility.warnings],
        "verified_by": "driver" if verdict == "verified" else "rules",
        "torch": None if torch is None else torch.as_json(),
    }
