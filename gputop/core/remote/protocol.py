"""The agent's line protocol: one JSON object per line, each with a ``"type"``.

``gputop agent`` writes ``hello`` once, then a ``snapshot`` (the ``snapshot --json``
document, core/snapshot_json.py) and a ``jobs`` line every interval, ``error`` when it
cannot sample at all, and ``history`` in answer to a request (agent_history.py); docs/lab.md
lists each line's fields. A reader ignores types it does not know, so the protocol can grow.
Hosts without gputop speak nvidia-smi CSV instead (reduced.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from gputop.core.clock_events import mask_from_names
from gputop.core.model import (
    ACTIVITY_KEYS,
    NO_ACTIVITY,
    Activity,
    Clocks,
    EccCounts,
    GpuClaim,
    GpuHealth,
    GpuProcess,
    GpuSample,
    MigDevice,
    ProcessCuda,
    ProcessOrigin,
    ProcessType,
    RemappedRows,
    RetiredPages,
    Snapshot,
    XidEvent,
)
from gputop.core.numbers import (
    LATEST_TIME_S,
    is_ascii_digits,
    outside_float,
    outside_json,
    strict_json,
    within,
)
from gputop.core.records import frozen
from gputop.core.sampling.process_env import MAX_PORT, MAX_RANK
from gputop.core.snapshot_json import (
    CLOCK_FIELDS,
    GPU_FIELDS,
    MIG_FIELDS,
    PROCESS_FIELDS,
    JsonFields,
)

PROTOCOL_VERSION = 1
MAX_CLAIM_TEXT = 200
"""A claim's user and note from a host are cut here (docs/claims.md allows 200)."""
MAX_USERS = 64
"""At most this many users "in use without a claim" are taken from a host, per GPU."""
MAX_GPUS = 256
"""A snapshot listing more GPUs than this is unreadable: no machine holds them (a DGX 8 or
16), and each costs the reader ~25 µs and the lab a line (100,000 took 2.7 s a line)."""
MAX_PROCESSES = 4096
"""At most this many processes are taken from one snapshot (all its GPUs together); the rest
are counted as dropped on their GPU (100,000 took 1 s a line)."""
MAX_MIG_DEVICES = 64
"""At most this many MIG devices per GPU are taken (an H100 has at most 7)."""
MAX_TEXT_CHARS = 4096
"""Every text a host sends (its name, a card's, a user's) is cut here: kept whole, one of
megabytes was measured and drawn on every frame."""
MAX_ARGS = 256
MAX_ARG_CHARS = 4096
"""A process's command is taken to this many arguments, each cut to this many characters."""


class ProtocolError(ValueError):
    """A line that is not what the protocol says; the message says what was wrong."""


@frozen(slots=False)
class Message:
    """One decoded line: its type and the whole object."""

    type: str
    body: dict[str, Any]


def encode(message_type: str, **fields: Any) -> str:
    """One protocol line, newline included, compact (it crosses the network every second);
    strict JSON, as every document gputop writes (an unknown number is ``null``)."""
    return strict_json({"type": message_type, **fields}, separators=(",", ":")) + "\n"


def decode(line: str | bytes) -> Message:
    """One line another machine sent; ProtocolError (never another exception) where it is
    not a typed object: not JSON, nested too deeply, a number of too many digits."""
    try:
        body = outside_json(line)
    except ValueError as error:
        raise ProtocolError(f"not JSON: {error}") from None
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        raise ProtocolError("not an object with a string 'type'")
    return Message(body["type"], body)


def snapshot_from_json(document: Any) -> Snapshot:
    """The Snapshot a schema-1 document describes; the inverse of ``snapshot_to_json``.

    The document comes from another machine: every field is type-checked, and a wrong one
    raises ProtocolError naming it rather than putting a bad value into the model.
    """
    doc = _object(document, "snapshot")
    if doc.get("schema") != 1:
        raise ProtocolError(f"snapshot schema {doc.get('schema')!r} is not 1")
    listed = _list(doc.get("gpus"), "gpus")
    if len(listed) > MAX_GPUS:
        raise ProtocolError(f"gpus lists {len(listed)}, more than any machine holds")
    room = [MAX_PROCESSES]  # what is left of the processes taken, over all its GPUs
    gpus = tuple(_gpu(g, i, room) for i, g in enumerate(listed))
    return Snapshot(
        host=_str(doc.get("host"), "host") or "?",
        driver_version=_str(doc.get("driver_version"), "driver_version"),
        cuda_driver_version=_int(doc.get("cuda_driver_version"), "cuda_driver_version"),
        nvml_version=_str(doc.get("nvml_version"), "nvml_version"),
        timestamp=_float(doc.get("timestamp"), "timestamp") or 0.0,
        gpus=gpus,
        simulated=_str(doc.get("simulated"), "simulated"),
        boot_id=_boot_id(doc.get("boot_id")),
    )


def _boot_id(value: Any) -> str | None:
    """A host's boot id, a UUID as Linux writes it; anything else is not one (``None``: its
    processes' start ticks are then not used)."""
    text = _str(value, "boot_id")
    if text is None or len(text) != 36 or not all(c in "0123456789abcdef-" for c in text):
        return None
    return text


def _gpu(value: Any, position: int, room: list[int]) -> GpuSample:
    where = f"gpus[{position}]"
    gpu = _object(value, where)
    index = _int(gpu.get("index"), f"{where}.index")
    if index is None:
        raise ProtocolError(f"{where}.index is missing")
    processes = gpu.get("processes")
    listed = _list(processes or [], f"{where}.processes")
    taken, room[0] = listed[: room[0]], max(0, room[0] - len(listed))
    dropped = _int(gpu.get("processes_dropped"), f"{where}.processes_dropped") or 0
    migs = _list(gpu.get("mig_devices") or [], f"{where}.mig_devices")[:MAX_MIG_DEVICES]
    users = _list(gpu.get("unclaimed_users") or [], f"{where}.unclaimed_users")[:MAX_USERS]
    return GpuSample(
        physical_index=index,
        lost=bool(gpu.get("lost")),
        no_access=bool(gpu.get("no_access")),
        processes_dropped=dropped + len(listed) - len(taken),
        clocks=_clocks(gpu.get("clocks_mhz"), f"{where}.clocks_mhz"),
        max_clocks=_clocks(gpu.get("max_clocks_mhz"), f"{where}.max_clocks_mhz"),
        compute_capability=_capability(
            gpu.get("compute_capability"), f"{where}.compute_capability"
        ),
        mig_devices=tuple(_mig(m, i, f"{where}.mig_devices[{i}]") for i, m in enumerate(migs)),
        processes=tuple(_process(p, index, f"{where}.processes[{i}]") for i, p in enumerate(taken)),
        processes_listed=processes is not None,
        activity=_activity(gpu.get("activity"), f"{where}.activity"),
        clock_event_mask=_clock_event_mask(gpu.get("clock_event_reasons"), where),
        claim=_claim(gpu.get("claim"), f"{where}.claim"),
        health=_health(gpu.get("health"), f"{where}.health"),
        unclaimed_users=tuple(
            _str(u, f"{where}.unclaimed_users[{i}]") or "?" for i, u in enumerate(users)
        ),
        **_read(gpu, where, GPU_FIELDS),
    )


MAX_HEALTH_ITEMS = 64
"""At most this many Xid events, Xid codes and refused calls are taken from a host, per GPU."""
MAX_COUNTER = 2**63 - 1


def _health(value: Any, where: str) -> GpuHealth | None:
    """A host's ``health`` of a GPU (docs/health.md): the readings only; the verdict, its
    reasons and the Xids' meanings are worked out here again, from gputop's own catalogue."""
    if value is None:
        return None
    health = _object(value, where)

    def count(item: dict[str, Any], key: str, at: str) -> int | None:
        number = _int(item.get(key), f"{at}.{key}")
        if number is not None and not 0 <= number <= MAX_COUNTER:
            raise ProtocolError(f"{at}.{key} is out of range")
        return number

    def flag(item: dict[str, Any], key: str, at: str) -> bool | None:
        return _bool(item.get(key), f"{at}.{key}")

    ecc = pages = rows = None
    if health.get("ecc_errors") is not None:
        at = f"{where}.ecc_errors"
        item = _object(health["ecc_errors"], at)
        # written by snapshot_json as dataclasses.asdict: its keys are the fields' names
        ecc = EccCounts(*(count(item, f.name, at) for f in fields(EccCounts)))
    if health.get("retired_pages") is not None:
        at = f"{where}.retired_pages"
        item = _object(health["retired_pages"], at)
        pages = RetiredPages(
            count(item, "single_bit", at), count(item, "double_bit", at), flag(item, "pending", at)
        )
    if health.get("remapped_rows") is not None:
        at = f"{where}.remapped_rows"
        item = _object(health["remapped_rows"], at)
        rows = RemappedRows(
            count(item, "correctable", at) or 0,
            count(item, "uncorrectable", at) or 0,
            bool(flag(item, "pending", at)),
            bool(flag(item, "failed", at)),
        )
    events = None
    if health.get("xid_events") is not None:
        at = f"{where}.xid_events"
        listed = _list(health["xid_events"], at)[-MAX_HEALTH_ITEMS:]
        events = []
        for i, raw in enumerate(listed):
            item = _object(raw, f"{at}[{i}]")
            xid = count(item, "xid", f"{at}[{i}]")
            time = _float(item.get("time"), f"{at}[{i}].time")
            if xid is None or time is None or not within(time, 0.0, LATEST_TIME_S):
                raise ProtocolError(f"{at}[{i}] needs an xid and a time")
            events.append(XidEvent(xid, time, max(1, count(item, "count", f"{at}[{i}]") or 1)))
    counts = []
    at = f"{where}.xid_counts"
    raw_counts = _object(health.get("xid_counts") or {}, at)
    for code in list(raw_counts)[:MAX_HEALTH_ITEMS]:
        if not (isinstance(code, str) and is_ascii_digits(code) and len(code) <= 10):
            raise ProtocolError(f"{at} has a key that is not an Xid code")
        counts.append((int(code), count(raw_counts, code, at) or 0))
    refused = tuple(
        (_str(name, f"{where}.refused[{i}]") or "?")[:MAX_CLAIM_TEXT]
        for i, name in enumerate(
            _list(health.get("refused") or [], f"{where}.refused")[:MAX_HEALTH_ITEMS]
        )
    )
    sources = tuple(
        source
        for source in _list(health.get("xid_sources") or [], f"{where}.xid_sources")
        if source in ("nvml events", "kernel log")
    )
    read_at = _float(health.get("read_at"), f"{where}.read_at")
    return GpuHealth(
        ecc=ecc,
        retired_pages=pages,
        remapped_rows=rows,
        pcie_replays=count(health, "pcie_replays", where),
        nvlink_crc_errors=count(health, "nvlink_crc_errors", where),
        xid_events=None if events is None else tuple(events),
        xid_sources=sources,
        xid_counts=tuple(sorted(counts)),
        refused=refused,
        read_at=read_at if within(read_at, 0.0, LATEST_TIME_S) else None,
    )


def _claim(value: Any, where: str) -> GpuClaim | None:
    """A host's ``claim`` of a GPU (docs/claims.md): its text is shown only cleaned; its
    numbers are checked for meaning with the rest (host_values.py)."""
    if value is None:
        return None
    claim = _object(value, where)
    until = _float(claim.get("until"), f"{where}.until")
    if until is None:
        raise ProtocolError(f"{where}.until is missing")
    return GpuClaim(
        user=(_str(claim.get("user"), f"{where}.user") or "?")[:MAX_CLAIM_TEXT],
        until=until,
        note=(_str(claim.get("note"), f"{where}.note") or "")[:MAX_CLAIM_TEXT],
        job=_int(claim.get("job"), f"{where}.job"),
        doubt=_doubt(claim, where),
    )


def _doubt(claim: dict[str, Any], where: str) -> str | None:
    """Why a host's possible hold is no believable claim (``certain`` false: a file that
    cannot be told, docs/claims.md), or None for a claim (or an older host's, which says
    nothing of it)."""
    reason = _str(claim.get("reason"), f"{where}.reason")
    if _bool(claim.get("certain"), f"{where}.certain") is not False:
        return None
    return (reason or "it cannot be told")[:MAX_CLAIM_TEXT]


def _activity(value: Any, where: str) -> Activity:
    """A host's activity figures; GPM answered where any figure but PCIe is known."""
    if value is None:
        return NO_ACTIVITY
    activity = _object(value, where)
    figures: dict[str, Any] = {
        key: _float(activity.get(key), f"{where}.{key}") for key in ACTIVITY_KEYS
    }
    gpm = any(v is not None for k, v in figures.items() if not k.startswith("pcie"))
    return Activity(gpm=gpm, **figures)


def _clock_event_mask(value: Any, where: str) -> int | None:
    """The mask of the reasons a host names; names this gputop does not know are left out
    (a newer host may know more)."""
    if value is None:
        return None
    mask = 0
    for i, name in enumerate(_list(value, f"{where}.clock_event_reasons")):
        text = _str(name, f"{where}.clock_event_reasons[{i}]")
        with contextlib.suppress(ValueError):
            mask |= mask_from_names([text or ""])
    return mask


def _clocks(value: Any, where: str) -> Clocks:
    return (
        Clocks() if value is None else Clocks(**_read(_object(value, where), where, CLOCK_FIELDS))
    )


def _mig(value: Any, position: int, where: str) -> MigDevice:
    mig = _object(value, where)
    activity = _activity(mig.get("activity"), f"{where}.activity")
    return MigDevice(mig_index=position, activity=activity, **_read(mig, where, MIG_FIELDS))


def _process(value: Any, physical_index: int, where: str) -> GpuProcess:
    process = _object(value, where)
    pid = _int(process.get("pid"), f"{where}.pid")
    if pid is None:
        raise ProtocolError(f"{where}.pid is missing")
    try:
        kind = ProcessType(process.get("type"))
    except ValueError:
        kind = ProcessType.COMPUTE
    try:
        origin = ProcessOrigin(process.get("origin"))
    except ValueError:
        origin = ProcessOrigin.FOREIGN
    command = _list(process.get("command") or [], f"{where}.command")[:MAX_ARGS]
    return GpuProcess(
        pid=pid,
        physical_index=physical_index,
        type=kind,
        origin=origin,
        command=tuple((_str(arg, f"{where}.command") or "")[:MAX_ARG_CHARS] for arg in command),
        cuda=_process_cuda(process.get("cuda"), f"{where}.cuda"),
        **_read(process, where, PROCESS_FIELDS),
    )


def _process_cuda(value: Any, where: str) -> ProcessCuda | None:
    """A process's own CUDA view; numbers out of range are not available, as where read."""
    if value is None:
        return None
    cuda = _object(value, where)
    devices = _list(cuda.get("devices") or [], f"{where}.devices")
    return ProcessCuda(
        visible_devices=_str(cuda.get("visible_devices"), f"{where}.visible_devices"),
        device_order=_str(cuda.get("device_order"), f"{where}.device_order"),
        rank=_ranged(cuda.get("rank"), f"{where}.rank", 0, MAX_RANK),
        local_rank=_ranged(cuda.get("local_rank"), f"{where}.local_rank", 0, MAX_RANK),
        world_size=_ranged(cuda.get("world_size"), f"{where}.world_size", 1, MAX_RANK),
        master_addr=_str(cuda.get("master_addr"), f"{where}.master_addr"),
        master_port=_ranged(cuda.get("master_port"), f"{where}.master_port", 1, MAX_PORT),
        run_id=_str(cuda.get("run_id"), f"{where}.run_id"),
        devices=tuple(
            index
            for item in devices
            if (index := _ranged(item, f"{where}.devices", 0, MAX_RANK)) is not None
        ),
        mismatch=bool(_bool(cuda.get("mismatch"), f"{where}.mismatch")),
        devices_from_driver=cuda.get("devices_from") == "driver",
        unknown=(_str(cuda.get("unknown"), f"{where}.unknown") or "")[:200] or None,
    )


def _ranged(value: Any, where: str, minimum: int, maximum: int) -> int | None:
    number = _int(value, where)
    return number if number is not None and minimum <= number <= maximum else None


def _capability(value: Any, where: str) -> tuple[int, int] | None:
    if value is None:
        return None
    items = _list(value, where)
    if len(items) != 2:
        raise ProtocolError(f"{where} must be [major, minor]")
    major, minor = (_int(item, where) for item in items)
    if major is None or minor is None:
        raise ProtocolError(f"{where} must be [major, minor]")
    return (major, minor)


def _read(item: dict[str, Any], where: str, fields: JsonFields) -> dict[str, Any]:
    """The model's keyword arguments for ``fields`` of ``item``, each read by its kind."""
    return {
        attr: _READERS[kind](item.get(key), f"{where}.{key}")
        for key, (attr, kind) in fields.items()
    }


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{where} is not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError(f"{where} is not a list")
    return value


def host_text(value: object) -> str | None:
    """A text a host sent, cut where decoded (``MAX_TEXT_CHARS``): kept whole, one of
    megabytes was cleaned and drawn again and again (the lab's toasts, status, card history).
    What is not a text is None."""
    return value[:MAX_TEXT_CHARS] if isinstance(value, str) else None


def _str(value: Any, where: str) -> str | None:
    """A text of the host's, cut at ``MAX_TEXT_CHARS``."""
    if value is None:
        return None
    if isinstance(value, str):
        return value[:MAX_TEXT_CHARS]
    raise ProtocolError(f"{where} is not a string")


def _int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"{where} is not a whole number")
    return value


def _float(value: Any, where: str) -> float | None:
    """A number as a float; a whole number beyond every float is infinite (host_values.py
    then refuses it as out of range)."""
    if value is None:
        return None
    number = outside_float(value)
    if number is None:
        raise ProtocolError(f"{where} is not a number")
    return number


def _bool(value: Any, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ProtocolError(f"{where} is not true or false")


_READERS: dict[type, Callable[[Any, str], Any]] = {str: _str, int: _int, float: _float, bool: _bool}
