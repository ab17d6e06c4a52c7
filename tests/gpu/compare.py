"""What gputop says against what the driver says: parsing, tolerances, verdicts, the report.

Independent of gputop (standard library only): it reads ``nvidia-smi``'s CSV, gputop's
``snapshot --json`` document, ``gputop map --json``, the exporter's Prometheus text and a CUDA
process's own enumeration, and says for each figure whether they agree, with both numbers.
A value that moves (memory used, temperature, power, utilisation, clocks, P-state) is read by
``nvidia-smi`` just before and just after gputop; gputop's reading passes if it lies between
the two, widened by the stated tolerance. A static value must be equal. docs/real-gpu.md.
Unit-tested in the normal suite against recorded outputs (tests/unit/test_gpu_compare.py).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MIB = 1 << 20

QUERY_FIELDS = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "memory.total",
    "memory.used",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "utilization.gpu",
    "clocks.sm",
    "pstate",
)
"""``nvidia-smi --query-gpu=`` these, ``--format=csv,noheader,nounits`` (query_gpu_command)."""

COMPUTE_APPS_FIELDS = ("pid", "process_name", "used_memory", "gpu_uuid")

NOT_AVAILABLE = {"[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unknown Error]", ""}

STATIC = ("index", "uuid", "name", "pci.bus_id", "memory.total", "power.limit")


@dataclass(frozen=True)
class Tolerance:
    """How far outside nvidia-smi's before/after range gputop's reading may be."""

    absolute: float
    relative: float = 0.0
    unit: str = ""

    def allowed(self, value: float) -> float:
        return max(self.absolute, abs(value) * self.relative)

    def describe(self) -> str:
        text = f"±{self.absolute:g} {self.unit}".rstrip()
        if self.relative:
            text += f" or ±{self.relative * 100:g} %, whichever is larger"
        return text


TOLERANCES: dict[str, Tolerance] = {
    "memory.total": Tolerance(0, unit="MiB"),
    "power.limit": Tolerance(0.01, unit="W"),  # nvidia-smi prints watts to 2 decimals
    "memory.used": Tolerance(16, unit="MiB"),
    "temperature.gpu": Tolerance(2, unit="°C"),
    "power.draw": Tolerance(15, 0.15, "W"),  # instant vs averaged power on some drivers
    "utilization.gpu": Tolerance(10, unit="points"),
    "clocks.sm": Tolerance(50, 0.10, "MHz"),
    "pstate": Tolerance(0, unit="P-states"),
}
"""Stated in the report beside every comparison; docs/real-gpu.md explains each."""


@dataclass
class Comparison:
    """One figure: what gputop said, what the driver (or a CUDA process) said, the verdict."""

    what: str
    gputop: Any
    reference: Any
    tolerance: str
    ok: bool
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "gputop": _jsonable(self.gputop),
            "reference": _jsonable(self.reference),
            "tolerance": self.tolerance,
            "ok": self.ok,
            "note": self.note,
        }


def query_gpu_command() -> list[str]:
    return [
        "nvidia-smi",
        "--query-gpu=" + ",".join(QUERY_FIELDS),
        "--format=csv,noheader,nounits",
    ]


def compute_apps_command() -> list[str]:
    return [
        "nvidia-smi",
        "--query-compute-apps=" + ",".join(COMPUTE_APPS_FIELDS),
        "--format=csv,noheader,nounits",
    ]


# --- parsing ---------------------------------------------------------------------------


def _rows(text: str, fields: Sequence[str]) -> list[dict[str, str | None]]:
    rows = []
    for number, row in enumerate(csv.reader(io.StringIO(text), skipinitialspace=True), 1):
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != len(fields):
            raise ValueError(
                f"nvidia-smi line {number}: {len(row)} fields, expected {len(fields)} "
                f"({', '.join(fields)})"
            )
        rows.append(
            {
                name: None if cell.strip() in NOT_AVAILABLE else cell.strip()
                for name, cell in zip(fields, row, strict=True)
            }
        )
    return rows


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse_pstate(text: str | None) -> int | None:
    if text is None:
        return None
    match = re.fullmatch(r"P(\d{1,2})", text.strip())
    if match is None:
        raise ValueError(f"not a P-state: {text!r}")
    return int(match.group(1))


def normal_bus_id(text: str | None) -> str | None:
    """``00000000:18:00.0`` whichever way it was written (NVML's 8-digit domain, CUDA's 4)."""
    if text is None:
        return None
    match = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", text.strip())
    if match is None:
        return text.strip().upper()
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):08X}:{bus.upper()}:{device.upper()}.{function}"


def parse_query_gpu(text: str) -> dict[str, dict[str, Any]]:
    """nvidia-smi's ``--query-gpu`` CSV as readings in its own units, by UUID."""
    readings: dict[str, dict[str, Any]] = {}
    for row in _rows(text, QUERY_FIELDS):
        uuid = row["uuid"]
        if uuid is None:
            raise ValueError("nvidia-smi gave a GPU without a UUID")
        readings[uuid] = {
            "index": None if row["index"] is None else int(row["index"]),
            "uuid": uuid,
            "name": row["name"],
            "pci.bus_id": normal_bus_id(row["pci.bus_id"]),
            "memory.total": _number(row["memory.total"]),
            "memory.used": _number(row["memory.used"]),
            "temperature.gpu": _number(row["temperature.gpu"]),
            "power.draw": _number(row["power.draw"]),
            "power.limit": _number(row["power.limit"]),
            "utilization.gpu": _number(row["utilization.gpu"]),
            "clocks.sm": _number(row["clocks.sm"]),
            "pstate": parse_pstate(row["pstate"]),
        }
    return readings


@dataclass(frozen=True)
class ComputeApp:
    pid: int
    process_name: str | None
    used_memory_mib: float | None
    gpu_uuid: str | None


def parse_compute_apps(text: str) -> list[ComputeApp]:
    """``nvidia-smi --query-compute-apps`` (compute_apps_command) as a list."""
    if "No running" in text:  # older drivers print a sentence instead of nothing
        return []
    return [
        ComputeApp(
            pid=int(row["pid"] or "-1"),
            process_name=row["process_name"],
            used_memory_mib=_number(row["used_memory"]),
            gpu_uuid=row["gpu_uuid"],
        )
        for row in _rows(text, COMPUTE_APPS_FIELDS)
    ]


def parse_gpu_list(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi -L``: each GPU's index, name and UUID, with its MIG devices' UUIDs."""
    gpus: list[dict[str, Any]] = []
    gpu_line = re.compile(r"GPU (\d+): (.*) \(UUID: (GPU-[0-9a-fA-F-]+)\)")
    mig_line = re.compile(r"\s+MIG (.*?)\s+Device\s+(\d+): \(UUID: (MIG-[0-9a-zA-Z/-]+)\)")
    for line in text.splitlines():
        if match := gpu_line.match(line):
            gpus.append(
                {
                    "index": int(match.group(1)),
                    "name": match.group(2),
                    "uuid": match.group(3),
                    "migs": [],
                }
            )
        elif (match := mig_line.match(line)) and gpus:
            gpus[-1]["migs"].append(
                {"profile": match.group(1), "device": int(match.group(2)), "uuid": match.group(3)}
            )
    return gpus


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Prometheus text exposition: (name, labels, value) for every sample line."""
    samples = []
    line_pattern = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$")
    label_pattern = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = line_pattern.match(line.strip())
        if match is None:
            raise ValueError(f"not a Prometheus sample line: {line!r}")
        labels = {
            key: value.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
            for key, value in label_pattern.findall(match.group(3) or "")
        }
        samples.append((match.group(1), labels, float(match.group(4))))
    return samples


# --- gputop's side in nvidia-smi's units -----------------------------------------------


def readings_from_snapshot(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``gputop snapshot --json`` as readings in nvidia-smi's units, by UUID."""
    readings: dict[str, dict[str, Any]] = {}
    for gpu in document.get("gpus", []):
        clocks = gpu.get("clocks_mhz") or {}
        readings[gpu["uuid"]] = {
            "index": gpu.get("index"),
            "uuid": gpu.get("uuid"),
            "name": gpu.get("name"),
            "pci.bus_id": normal_bus_id(gpu.get("pci_bus_id")),
            "memory.total": _mib_floor(gpu.get("memory_total_bytes")),
            "memory.used": _mib_floor(gpu.get("memory_used_bytes")),
            "temperature.gpu": gpu.get("temperature_c"),
            "power.draw": gpu.get("power_w"),
            "power.limit": gpu.get("power_limit_w"),
            "utilization.gpu": gpu.get("utilization_gpu"),
            "clocks.sm": clocks.get("sm"),
            "pstate": gpu.get("performance_state"),
        }
    return readings


EXPORTER_FIELDS = {
    "DCGM_FI_DEV_FB_TOTAL": "memory.total",
    "DCGM_FI_DEV_FB_USED": "memory.used",
    "DCGM_FI_DEV_GPU_TEMP": "temperature.gpu",
    "DCGM_FI_DEV_POWER_USAGE": "power.draw",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "power.limit",
    "DCGM_FI_DEV_GPU_UTIL": "utilization.gpu",
    "DCGM_FI_DEV_SM_CLOCK": "clocks.sm",
    "DCGM_FI_DEV_PSTATE": "pstate",
}
"""The exporter's dcgm-exporter gauges and the nvidia-smi field each must equal."""


def readings_from_exporter(
    samples: Iterable[tuple[str, Mapping[str, str], float]],
) -> dict[str, dict[str, Any]]:
    """The exporter's DCGM_FI_DEV_* gauges (and their labels) in nvidia-smi's units."""
    readings: dict[str, dict[str, Any]] = {}
    for name, labels, value in samples:
        wanted = EXPORTER_FIELDS.get(name)
        uuid = labels.get("UUID")
        if wanted is None or not uuid:
            continue
        reading = readings.setdefault(
            uuid,
            {
                "index": int(labels["gpu"]) if labels.get("gpu", "").isdigit() else None,
                "uuid": uuid,
                "name": labels.get("modelName"),
                "pci.bus_id": normal_bus_id(labels.get("pci_bus_id")),
            },
        )
        if wanted in ("memory.total", "memory.used"):
            reading[wanted] = float(math.floor(value + 1e-9))  # MiB as nvidia-smi cuts them
        elif wanted == "pstate":
            reading[wanted] = int(value)
        else:
            reading[wanted] = value
    return readings


def _mib_floor(value: Any) -> float | None:
    return None if value is None else float(int(value) // MIB)


# --- verdicts ----------------------------------------------------------------------------


def compare_readings(
    ours: Mapping[str, Mapping[str, Any]],
    before: Mapping[str, Mapping[str, Any]],
    after: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    fields: Sequence[str] = QUERY_FIELDS,
    source: str = "gputop",
) -> list[Comparison]:
    """Every field of every GPU nvidia-smi lists, gputop's reading against nvidia-smi's.

    A GPU on one side only is a failed comparison of its own. ``after`` defaults to
    ``before`` (one reading: the tolerance alone)."""
    after = before if after is None else after
    comparisons: list[Comparison] = []
    for uuid in sorted(set(before) | set(ours)):
        if uuid not in ours or uuid not in before:
            comparisons.append(
                Comparison(
                    f"GPU {uuid}",
                    "listed" if uuid in ours else "missing",
                    "listed" if uuid in before else "missing",
                    "exact",
                    False,
                    f"{source} and nvidia-smi disagree on which GPUs exist",
                )
            )
            continue
        label = f"GPU {before[uuid].get('index')}"
        for name in fields:
            if name == "uuid":
                continue
            comparisons.append(
                compare_value(
                    f"{label} {name}",
                    name,
                    ours[uuid].get(name),
                    before[uuid].get(name),
                    after.get(uuid, before[uuid]).get(name),
                )
            )
    return comparisons


def compare_value(what: str, name: str, ours: Any, first: Any, second: Any) -> Comparison:
    """One field: exact where static, else within nvidia-smi's range widened by TOLERANCES."""
    if name in STATIC and name not in TOLERANCES:
        ok = ours == first == second or (
            isinstance(ours, str) and isinstance(first, str) and ours.strip() == first.strip()
        )
        return Comparison(what, ours, first, "exact", ok)
    tolerance = TOLERANCES[name]
    if first is None and second is None:
        ok = ours is None
        note = "" if ok else "nvidia-smi has no reading where gputop has one"
        return Comparison(what, ours, None, tolerance.describe(), ok, note)
    if ours is None:
        return Comparison(
            what,
            None,
            first,
            tolerance.describe(),
            False,
            "gputop has no reading where nvidia-smi has",
        )
    known = [value for value in (first, second) if value is not None]
    low, high = min(known), max(known)
    slack = tolerance.allowed(max(abs(low), abs(high)))
    ok = low - slack - 1e-9 <= float(ours) <= high + slack + 1e-9
    reference: Any = low if low == high else [low, high]
    note = "" if ok else f"outside nvidia-smi's {reference} by more than {slack:g}"
    return Comparison(what, ours, reference, tolerance.describe(), ok, note)


def process_comparisons(
    document: Mapping[str, Any],
    apps: Sequence[ComputeApp],
    *,
    pid: int,
    user: str,
    gpu_uuid: str,
    held_bytes: int,
    overhead_mib: float,
) -> list[Comparison]:
    """A CUDA process the check started, holding ``held_bytes`` on ``gpu_uuid``: gputop
    lists it there with its pid and user, and memory between what it holds and that plus
    the driver's overhead, equal (to the MiB) to what nvidia-smi lists for it."""
    ours = [
        (gpu["uuid"], process)
        for gpu in document.get("gpus", [])
        for process in gpu.get("processes") or []
        if process.get("pid") == pid
    ]
    theirs = [app for app in apps if app.pid == pid]
    comparisons = [
        Comparison(
            f"pid {pid} listed",
            [uuid for uuid, _ in ours],
            [app.gpu_uuid for app in theirs],
            "the same GPU on both sides",
            [uuid for uuid, _ in ours] == [gpu_uuid]
            and [app.gpu_uuid for app in theirs] == [gpu_uuid],
        )
    ]
    if len(ours) != 1:
        return comparisons
    process = ours[0][1]
    comparisons.append(
        Comparison(
            f"pid {pid} user", process.get("user"), user, "exact", process.get("user") == user
        )
    )
    used = process.get("used_memory_bytes")
    used_mib = None if used is None else used / MIB
    held_mib = held_bytes / MIB
    comparisons.append(
        Comparison(
            f"pid {pid} memory against what it holds",
            used_mib,
            held_mib,
            f"from the amount held to that + {overhead_mib:g} MiB (driver overhead)",
            used_mib is not None and held_mib <= used_mib <= held_mib + overhead_mib,
        )
    )
    if len(theirs) == 1:
        smi = theirs[0].used_memory_mib
        comparisons.append(
            Comparison(
                f"pid {pid} memory against nvidia-smi",
                None if used is None else int(used) // MIB,
                smi,
                "±1 MiB",
                smi is not None and used is not None and abs(int(used) // MIB - smi) <= 1,
            )
        )
    return comparisons


# --- CUDA_VISIBLE_DEVICES ----------------------------------------------------------------


def uuid_hex(uuid: str) -> str:
    """The 32 hex digits of a ``GPU-``/``MIG-`` UUID (or of a driver's raw 16 bytes)."""
    text = uuid.split("-", 1)[1] if uuid[:4] in ("GPU-", "MIG-") else uuid
    return text.replace("-", "").lower()


def name_cuda_uuids(raw_hex: Sequence[str], known: Iterable[str]) -> list[str]:
    """The driver's raw UUID bytes as the GPU or MIG UUID nvidia-smi names them by (the
    driver gives a MIG device's UUID in the same 16 bytes; the prefix is nvidia-smi's)."""
    by_hex = {uuid_hex(uuid): uuid for uuid in known}
    named = []
    for raw in raw_hex:
        h = raw.lower()
        named.append(by_hex.get(h, f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"))
    return named


def unique_prefix(uuid: str, others: Iterable[str], shortest: int = 8) -> str:
    """``GPU-xxxxxxxx``: the shortest prefix (at least ``shortest`` hex digits) no other has."""
    digits = uuid_hex(uuid)
    other_digits = [uuid_hex(other) for other in others if other != uuid]
    for length in range(shortest, len(digits) + 1):
        if not any(other.startswith(digits[:length]) for other in other_digits):
            break
    text = uuid.split("-", 1)[1]
    kept, count = [], 0
    for char in text:
        if count == length:
            break
        kept.append(char)
        count += char != "-"
    return uuid.split("-", 1)[0] + "-" + "".join(kept)


def visible_device_forms(gpus: Sequence[Mapping[str, Any]]) -> list[tuple[str, str | None]]:
    """Every CUDA_VISIBLE_DEVICES form this machine allows, as (label, value); ``None`` is
    unset. ``gpus`` is parse_gpu_list's answer."""
    forms: list[tuple[str, str | None]] = [("unset", None), ("index 0", "0")]
    uuids = [gpu["uuid"] for gpu in gpus]
    last = len(gpus) - 1
    if len(gpus) > 1:
        forms.append(("every index, reversed", ",".join(str(g["index"]) for g in gpus[::-1])))
        forms.append(("two UUIDs, reversed", f"{uuids[last]},{uuids[0]}"))
        forms.append(("an index then a UUID prefix", f"{last},{unique_prefix(uuids[0], uuids)}"))
    forms.append(("full UUID", uuids[last]))
    forms.append(("UUID prefix", unique_prefix(uuids[last], uuids)))
    migs = [mig["uuid"] for gpu in gpus for mig in gpu.get("migs", [])]
    if migs:
        forms.append(("MIG UUID", migs[0]))
        forms.append(("MIG UUID prefix", unique_prefix(migs[0], migs)))
        if len(migs) > 1:
            forms.append(("two MIG UUIDs", f"{migs[0]},{migs[1]}"))
        forms.append(("a MIG UUID and a GPU UUID", f"{migs[0]},{uuids[0]}"))
    forms += [
        ("an invalid entry after a valid one", f"0,{len(gpus) + 7}"),
        ("an invalid entry first", f"{len(gpus) + 7},0"),
        ("an unknown UUID", "GPU-00000000-dead-beef-0000-000000000000"),
        ("a duplicate", "0,0"),
        ("empty", ""),
        ("-1", "-1"),
        ("spaces around an entry", " 0 "),
    ]
    return forms


def mapping_comparison(
    label: str, map_document: Mapping[str, Any], cuda_uuids: Sequence[str]
) -> Comparison:
    """``gputop map --json``'s cuda:N list against what a CUDA process enumerated."""
    ours = [device.get("mig_uuid") or device.get("uuid") for device in map_document["devices"]]
    return Comparison(
        f"CUDA_VISIBLE_DEVICES {label}",
        ours,
        list(cuda_uuids),
        "the same devices in the same order",
        ours == list(cuda_uuids),
        f"gputop answered from {map_document.get('source', '?')}",
    )


# --- the report ----------------------------------------------------------------------------


@dataclass
class Result:
    """One named check: pytest's outcome and every comparison it made."""

    name: str
    outcome: str = "not run"
    comparisons: list[Comparison] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def failed(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.ok]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "outcome": self.outcome,
            "note": self.note,
            "numbers": _jsonable(self.numbers),
            "comparisons": [c.to_json() for c in self.comparisons],
        }


def report_json(machine: Mapping[str, Any], results: Sequence[Result]) -> str:
    """The report as strict JSON (a NaN or an infinity becomes null)."""
    document = {
        "machine": _jsonable(dict(machine)),
        "summary": _summary(results),
        "results": [result.to_json() for result in results],
    }
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def report_markdown(machine: Mapping[str, Any], results: Sequence[Result]) -> str:
    lines = ["# gputop gpu-check report", ""]
    for key, value in machine.items():
        lines.append(f"- **{_cell(key)}**: {_cell(_show(value))}")
    summary = _summary(results)
    lines += [
        "",
        "**Summary**: "
        + (", ".join(f"{n} {outcome}" for outcome, n in summary.items()) or "no check ran"),
        "",
        "| check | outcome | compared | failed | note |",
        "| --- | --- | --- | --- | --- |",
    ]
    for result in results:
        lines.append(
            f"| {_cell(result.name)} | {result.outcome} | {len(result.comparisons)} | "
            f"{len(result.failed)} | {_cell(result.note)} |"
        )
    for result in results:
        if not result.comparisons and not result.numbers:
            continue
        lines += ["", f"## {_cell(result.name)}: {result.outcome}"]
        if result.numbers:
            lines.append("")
        for key, value in result.numbers.items():
            lines.append(f"- {_cell(key)}: {_cell(_show(value))}")
        if result.comparisons:
            lines += [
                "",
                "| what | gputop | reference | tolerance | ok | note |",
                "| --- | --- | --- | --- | --- | --- |",
            ]
            for c in result.comparisons:
                lines.append(
                    f"| {_cell(c.what)} | {_cell(_show(c.gputop))} | {_cell(_show(c.reference))} "
                    f"| {_cell(c.tolerance)} | {'yes' if c.ok else '**NO**'} | {_cell(c.note)} |"
                )
    return "\n".join(lines) + "\n"


def _summary(results: Sequence[Result]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for result in results:
        counts[result.outcome] = counts.get(result.outcome, 0) + 1
    return counts


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _show(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return "; ".join(_show(item) for item in value)
    return str(value)


def _cell(value: Any) -> str:
    """A Markdown table cell: one line, no pipe, no control character."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(value))
    return text.replace("|", "\\|")
