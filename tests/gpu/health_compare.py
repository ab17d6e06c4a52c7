"""gputop's health counters against ``nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER``.

Standard library only, like compare.py. nvidia-smi's ``-q`` text is a tree by indentation
(``GPU 00000000:07:00.0``, then ``Key : Value`` lines four spaces deeper per level); its
field names differ between driver branches (``Single Bit``/``Double Bit`` sections with a
``Total`` before Ampere; ``SRAM``/``DRAM Correctable``/``Uncorrectable`` lines after; R550
splits ``SRAM Uncorrectable Parity`` and ``SEC-DED``). nvidia-smi's text is not promised to stay
the same between releases (its man page), so a field it does not print is "not compared",
never a failure. docs/health.md, docs/real-gpu.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpu.compare import Comparison

HEALTH_COMMAND = ("nvidia-smi", "-q", "-d", "ECC,PAGE_RETIREMENT,ROW_REMAPPER")
_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_LINE = re.compile(r"^( *)([^:]+?)\s*(?::\s*(.*))?$")
_NUMBER = re.compile(r"^\d+$")
NOT_AVAILABLE = {"N/A", "[N/A]", "Not Supported", "[Not Supported]", ""}

Path = tuple[str, ...]


def parse_query(text: str) -> dict[str, dict[Path, str]]:
    """Each GPU's ``-q`` fields by their path of section names, keyed by its PCI bus id
    (upper case, as NVML writes it)."""
    gpus: dict[str, dict[Path, str]] = {}
    fields: dict[Path, str] | None = None
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        gpu = _GPU.match(line)
        if gpu is not None:
            fields = gpus.setdefault(_bus(gpu[1]), {})
            stack = []
            continue
        match = _LINE.match(line)
        if fields is None or match is None or not match[2].strip():
            continue
        depth = len(match[1])
        while stack and stack[-1][0] >= depth:
            stack.pop()
        name = match[2].strip()
        if match[3] is None:  # a section
            stack.append((depth, name))
        else:
            path = (*(section for _, section in stack), name)
            fields[path] = match[3].strip()
    return gpus


def _bus(text: str) -> str:
    domain, rest = text.split(":", 1)
    return f"{int(domain, 16):08X}:{rest.upper()}"


def _count(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip()
    return int(value) if _NUMBER.match(value) else None


def _flag(value: str | None) -> bool | None:
    if value is None or value.strip() in NOT_AVAILABLE:
        return None
    return {"yes": True, "no": False}.get(value.strip().lower())


def _ecc_total(fields: Mapping[Path, str], counter: str, uncorrected: bool) -> int | None:
    """The ``Volatile`` or ``Aggregate`` total of one kind, as nvidia-smi prints it: the
    ``Total`` of the ``Double Bit``/``Single Bit`` section where there is one, else the sum
    of the location lines of that kind (``DRAM Uncorrectable``, ``SRAM Uncorrectable ...``)."""
    bit = "Double Bit" if uncorrected else "Single Bit"
    total = _count(fields.get(("ECC Errors", counter, bit, "Total")))
    if total is not None:
        return total
    values = []
    for path, value in fields.items():
        if len(path) != 3 or path[:2] != ("ECC Errors", counter):
            continue
        name = path[2]
        if "Threshold" in name:
            continue
        kind_uncorrected = "Uncorrectable" in name
        if kind_uncorrected == uncorrected and ("Correctable" in name or kind_uncorrected):
            number = _count(value)
            if number is not None:
                values.append(number)
    return sum(values) if values else None


def smi_health(fields: Mapping[Path, str]) -> dict[str, Any]:
    """What nvidia-smi says of one GPU, in ``snapshot --json``'s health names (``None``: it
    prints N/A or does not print the field)."""
    return {
        "ecc_errors.corrected_volatile": _ecc_total(fields, "Volatile", False),
        "ecc_errors.uncorrected_volatile": _ecc_total(fields, "Volatile", True),
        "ecc_errors.corrected_aggregate": _ecc_total(fields, "Aggregate", False),
        "ecc_errors.uncorrected_aggregate": _ecc_total(fields, "Aggregate", True),
        "retired_pages.single_bit": _count(fields.get(("Retired Pages", "Single Bit ECC"))),
        "retired_pages.double_bit": _count(fields.get(("Retired Pages", "Double Bit ECC"))),
        "retired_pages.pending": _flag(
            fields.get(("Retired Pages", "Pending Page Blacklist"))
            or fields.get(("Retired Pages", "Pending"))
        ),
        "remapped_rows.correctable": _count(fields.get(("Remapped Rows", "Correctable Error"))),
        "remapped_rows.uncorrectable": _count(fields.get(("Remapped Rows", "Uncorrectable Error"))),
        "remapped_rows.pending": _flag(fields.get(("Remapped Rows", "Pending"))),
        "remapped_rows.failed": _flag(fields.get(("Remapped Rows", "Remapping Failure Occurred"))),
    }


def gputop_health(gpu: Mapping[str, Any]) -> dict[str, Any]:
    """The same names from one GPU of ``snapshot --json``."""
    health = gpu.get("health") or {}
    result: dict[str, Any] = {}
    for group in ("ecc_errors", "retired_pages", "remapped_rows"):
        values = health.get(group) or {}
        for key in smi_health({}):
            if key.startswith(f"{group}."):
                result[key] = values.get(key.split(".", 1)[1])
    return result


def compare_health(document: Mapping[str, Any], before: str, after: str) -> list[Comparison]:
    """Each GPU's health counters, gputop's between nvidia-smi's readings before and after
    (a counter may rise in between); a field nvidia-smi does not print is not compared."""
    first, second = parse_query(before), parse_query(after)
    comparisons = []
    for gpu in document.get("gpus", []):
        bus = gpu.get("pci_bus_id")
        if bus not in first:
            comparisons.append(
                Comparison(f"GPU {gpu.get('index')} health", bus, None, "exact", False,
                           "nvidia-smi -q does not list this GPU")
            )  # fmt: skip
            continue
        low, high = smi_health(first[bus]), smi_health(second.get(bus, first[bus]))
        ours = gputop_health(gpu)
        for key, reference in low.items():
            what = f"GPU {gpu.get('index')} {key}"
            mine, later = ours.get(key), high.get(key)
            if reference is None and later is None:
                note = "" if mine is None else "gputop has a reading where nvidia-smi has none"
                comparisons.append(Comparison(what, mine, None, "exact", mine is None, note))
                continue
            if isinstance(reference, bool) or isinstance(later, bool):
                ok = mine in (reference, later)
            else:
                known = [v for v in (reference, later) if v is not None]
                ok = mine is not None and min(known) <= mine <= max(known)
            comparisons.append(Comparison(what, mine, reference, "exact (between reads)", ok))
    return comparisons
