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

from gputop.cli.arg_types import add_python_argument
from gputop.cli.claims_common import sample
from gputop.core import settings
from gputop.core.numbers import strict_json
from gputop.core.probes import (
    DriverProbe,
    DriverProbeResult,
    compare_with_rules,
    order_note,
    probe_torch,
)
from gputop.core.probes.driver_mapping import driver_visibility, rules_error
from gputop.core.safe_text import clean
from gputop.core.slurm.allocation import allocation_json, describe_allocation, explain_allocation
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
    add_python_argument(parser, "the interpreter whose torch to ask")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch probe")
    parser.add_argument("--json", action="store_true", help="print JSON instead")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    visible = args.visible if args.visible is not None else os.environ.get(CVD)
    order = args.order if args.order is not None else os.environ.get(ORDER)
    simulated = bool(args.fake or settings.FAKE.read())
    snapshot = sample(args.fake)
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
    # The driver's answer is the mapping; the rules' list stays only where it did not answer.
    rules = visibility
    driver_seen = None if simulated else driver_visibility(rules, probe, snapshot.gpus)
    rules_wrong = None if driver_seen is None else rules_error(rules, driver_seen)
    if driver_seen is not None:
        visibility = driver_seen
        if rules_wrong is not None:
            driver_message = rules_wrong

    allocation = explain_allocation(os.environ, len(snapshot.gpus), visibility)
    if args.json:
        document = _as_json(visibility, verdict, torch)
        document["source"] = "driver" if visibility.devices_from_driver else "rules"
        document["rules_devices"] = _devices_json(rules)
        document["rules_error"] = rules_wrong
        document["slurm"] = None if allocation is None else allocation_json(allocation)
        document["order_source"] = order_source
        document["driver_devices"] = _driver_devices(default)
        print(strict_json(document, indent=2))
    else:
        print(_as_text(visibility, order_message, driver_message, torch_message))
        if allocation is not None:  # inside a Slurm job (docs/slurm.md)
            print("\n".join(clean(line) for line in describe_allocation(allocation)))
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
    source = (
        "as the CUDA driver enumerates them"
        if visibility.devices_from_driver
        else "as gputop's rules predict them"
    )
    lines.append(f"cuda:N {source}:")
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
    if value is None:
        return "(unset)"
    return repr(value) if value.strip() != value or not value else clean(value)


def _as_json(visibility: Visibility, verdict: str, torch: Any) -> dict[str, Any]:
    return {
        "cuda_visible_devices": visibility.cuda_visible_devices,
        "cuda_device_order": visibility.cuda_device_order,
        "devices": _devices_json(visibility),
        "warnings": [warning.message for warning in visibility.warnings],
        "verified_by": "driver" if verdict == "verified" else "rules",
        "torch": None if torch is None else torch.as_json(),
    }


def _devices_json(visibility: Visibility) -> list[dict[str, Any]]:
    return [
        {
            "logical_index": device.logical_index,
            "physical_index": device.physical_index,
            "uuid": device.uuid,
            "name": device.name,
            "mig_uuid": device.mig_uuid,
        }
        for device in visibility.devices
    ]
