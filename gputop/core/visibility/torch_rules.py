"""What torch's NVML-based helpers believe CUDA_VISIBLE_DEVICES means (torch 2.13).

``torch.cuda.device_count()`` before CUDA is initialised, and ``torch.cuda.memory_usage``,
``utilization``, ``temperature`` and ``power_draw``, map ``cuda:N`` to an NVML index with
their own parser (``_parse_visible_devices``, ``_transform_uuid_to_ordinals``,
``_device_count_nvml``, ``_get_nvml_device_index``), which ignores CUDA_DEVICE_ORDER and
differs from the driver in places (docs/cuda-visibility.md, "Where torch differs"). This
is a faithful copy of that logic, checked against torch itself by a differential test, so
gputop can warn where torch would read another card than ``cuda:N``.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputop.core.records import frozen
from gputop.core.safe_text import clean


@frozen
class TorchView:
    nvml_indices: tuple[int, ...] | None
    """NVML index torch's helpers use for cuda:0, cuda:1, ...; ``None`` when torch gives up."""
    problem: str | None = None
    """Why torch gives up: it raises, or the value names MIG devices."""


def parse_visible_devices(value: str | None) -> list[int] | list[str]:
    """torch.cuda._parse_visible_devices, without the ROCm branch."""
    if value is None:
        return list(range(64))
    for prefix in ("GPU-", "MIG-"):
        if value.startswith(prefix):
            return _parse_with_prefix(value, prefix)
    result: list[int] = []
    for element in value.split(","):
        number = strtoul(element.strip())
        if number in result:
            return []
        if number < 0:
            break
        result.append(number)
    return result


def strtoul(text: str) -> int:
    """torch.cuda._parse_visible_devices._strtoul: -1 for no digits; raises on a bare sign."""
    if not text:
        return -1
    end = 0
    for position, char in enumerate(text):
        if not (char.isdigit() or (position == 0 and char in "+-")):
            break
        end = position + 1
    return int(text[:end]) if end > 0 else -1


def _unreadable(value: str | None) -> str:
    """The entry torch's ``_strtoul`` raises on, in words: a sign alone ('-'), or digits
    ``str.isdigit`` takes and ``int`` does not ('²')."""
    for entry in (value or "").split(","):
        try:
            strtoul(entry.strip())
        except ValueError:
            return f"the entry '{clean(entry.strip()[:24])}', which int() cannot read"
    return "an entry int() cannot read"


def _parse_with_prefix(value: str, prefix: str) -> list[str]:
    result: list[str] = []
    for element in value.split(","):
        if element in result:
            return []
        if not element.startswith(prefix):
            break
        result.append(element)
    return result


def transform_uuid_to_ordinals(candidates: Sequence[str], uuids: Sequence[str]) -> list[int]:
    """torch.cuda._transform_uuid_to_ordinals."""
    result: list[int] = []
    for candidate in candidates:
        best = -1
        for ordinal, uuid in enumerate(uuids):
            if not uuid.startswith(candidate):
                continue
            if best != -1:
                best = -1
                break
            best = ordinal
        if best < 0:
            break
        if best in result:
            return []
        result.append(best)
    return result


def torch_view(value: str | None, nvml_uuids: Sequence[str]) -> TorchView:
    """The NVML index torch's helpers use for each cuda:N, given NVML's UUID list."""
    try:
        visible = parse_visible_devices(value)
    except ValueError:
        return TorchView(
            None, f"torch.cuda.device_count() raises ValueError on {_unreadable(value)}"
        )
    if not visible:
        return TorchView(())
    if isinstance(visible[0], str):
        names = [str(v) for v in visible]
        if names[0].startswith("MIG-"):
            return TorchView(None, "torch's NVML-based helpers cannot map MIG devices")
        return TorchView(tuple(transform_uuid_to_ordinals(names, nvml_uuids)))
    numbers = [int(v) for v in visible]
    count = len(nvml_uuids)
    usable = next((i for i, n in enumerate(numbers) if n >= count), len(numbers))
    return TorchView(tuple(numbers[:usable]))
