"""Load and validate a scenario file (the format, its extensions included: docs/scenario.md).

A scenario is written by hand, so the file is checked whole at load time and every problem
is a ``ScenarioError`` naming the file and the JSON location (``gpus[1].uuid``): a typo must
not surface minutes later as a dashboard that quietly shows "N/A". Keys starting with ``_``
are comments; other unknown keys are errors.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pynvml

from gputop.core.errors import ScenarioError
from gputop.core.fake.json_fields import ObjectReader
from gputop.core.fake.scenario_card import (
    HEALTH_KEYS,
    activity_of,
    clock_event_reasons,
    compute_capability,
    health,
    hopper_activity,
    needs_hopper,
)
from gputop.core.fake.scenario_types import (
    DEFAULT_START_TIME,
    PROCESS_TYPES,
    ClockSignals,
    JobProfile,
    MaxClocks,
    Scenario,
    ScenarioGpu,
    ScenarioMigDevice,
    ScenarioProcess,
    keys_of,
)
from gputop.core.model import CUDA_ENVIRONMENT
from gputop.core.numbers import LATEST_TIME_S
from gputop.core.private_files import NotRegularFile, read_regular_file

__all__ = [
    "ClockSignals",
    "MaxClocks",
    "Scenario",
    "ScenarioGpu",
    "ScenarioMigDevice",
    "ScenarioProcess",
    "load_scenario",
    "parse_scenario",
]

MAX_MIG_DEVICES = 7
MAX_SCENARIO_BYTES = 16 << 20
"""16 MiB: the largest built-in scenario (dgx-h100, 8 cards, 200 processes) is 95 KB; a
larger file is refused, not read whole."""
MAX_SCENARIO_NUMBER = 1e12
"""No reading, size or time in a scenario comes near this; larger values (``1e308``) only
overflow later, deep inside a sample, where no message can name the field."""
PID_MAX = 2**32 - 1
"""NVML's pid is an unsigned 32-bit integer: a scenario may give any it holds, as a driver
may (pid_t is signed: the sampler drops a pid past ``numbers.MAX_PID``)."""

_HEX_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_GPU_UUID = re.compile(rf"GPU-{_HEX_UUID}")
_MIG_UUID = re.compile(rf"MIG-(?:{_HEX_UUID}|GPU-{_HEX_UUID}/\d+/\d+)")
_PCI_BUS_ID = re.compile(
    r"(?P<domain>[0-9a-fA-F]{4}|[0-9a-fA-F]{8}):(?P<bus>[0-9a-fA-F]{2}):"
    r"(?P<device>[0-9a-fA-F]{2})\.(?P<function>[0-7])"
)

_TOP_KEYS = keys_of(Scenario, leaving=("path",))
_READINGS = tuple(f.name for f in fields(ScenarioGpu) if f.type == "Signal | None")
"""A card's readings: its fields that are signals (clocks and activity are objects)."""
_GPU_KEYS = (*keys_of(ScenarioGpu, leaving=("health",)), *HEALTH_KEYS)
_CLOCK_KEYS = keys_of(ClockSignals)
_JOB_PROFILE_KEYS = keys_of(JobProfile)
_PROCESS_KEYS = keys_of(ScenarioProcess)
_MIG_KEYS = keys_of(ScenarioMigDevice)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate the scenario file at ``path``."""
    where = str(path)
    try:
        raw = read_regular_file(path, MAX_SCENARIO_BYTES + 1)[1]
    except FileNotFoundError:
        raise ScenarioError(where, "file not found") from None
    except NotRegularFile:  # a FIFO is not waited on
        directory = os.path.isdir(path)
        problem = "is a directory, not a scenario file" if directory else "not a regular file"
        raise ScenarioError(where, problem) from None
    except OSError as error:
        raise ScenarioError(where, f"cannot read the file: {error.strerror}") from None
    if len(raw) > MAX_SCENARIO_BYTES:
        raise ScenarioError(where, "larger than 16 MiB, far more than a scenario holds")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ScenarioError(where, f"not UTF-8 text ({error.reason})") from None
    except json.JSONDecodeError as error:
        raise ScenarioError(
            where, f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except ValueError as error:  # an integer of more than 4300 digits
        raise ScenarioError(where, f"not usable JSON: {error}") from None
    except RecursionError:
        raise ScenarioError(where, "not usable JSON: nested too deeply") from None
    return parse_scenario(data, where)


def parse_scenario(data: Any, path: str) -> Scenario:
    """Validate already-decoded JSON; ``path`` names the source in errors."""
    if not isinstance(data, dict):
        raise ScenarioError(path, "the top level must be a JSON object with a 'gpus' list")
    _check_numbers(path, data, "")
    top = ObjectReader(path, data, "", _TOP_KEYS)
    if data.get("gpus") is None:
        raise top.error("gpus", "is required: a list with one object per GPU")
    gpu_items = list(top.items("gpus"))
    if not gpu_items:
        raise top.error("gpus", "must list at least one GPU")
    gpus = tuple(_parse_gpu(path, where, item) for where, item in gpu_items)
    _check_unique(path, [(f"gpus[{i}].uuid", gpu.uuid) for i, gpu in enumerate(gpus)], "uuid")
    _check_unique(
        path,
        [(f"gpus[{i}].pci_bus_id", g.pci_bus_id) for i, g in enumerate(gpus) if g.pci_bus_id],
        "PCI bus id",
    )
    _check_unique(
        path,
        [
            (f"gpus[{i}].mig_devices[{j}].uuid", mig.uuid)
            for i, gpu in enumerate(gpus)
            for j, mig in enumerate(gpu.mig_devices)
        ],
        "MIG uuid",
    )
    driver_version = top.string("driver_version")
    nvml_version = top.string("nvml_version")
    if nvml_version is None and driver_version is not None:
        nvml_version = f"12.{driver_version}"
    start_time = top.number("start_time")
    if start_time is not None and start_time > LATEST_TIME_S:
        raise top.error("start_time", f"must be at most {LATEST_TIME_S:.0f}, got {start_time:g}")
    return Scenario(
        path=path,
        description=top.string("description") or f"simulated GPUs from {Path(path).name}",
        gpus=gpus,
        driver_version=driver_version,
        cuda_driver_version=top.integer("cuda_driver_version"),
        nvml_version=nvml_version,
        hostname=top.string("hostname"),
        missing_functions=_function_names(top, "missing_functions"),
        function_errors=_function_errors(top, "function_errors"),
        start_time=DEFAULT_START_TIME if start_time is None else start_time,
        job_profile=_job_profile(top),
    )


def _job_profile(top: ObjectReader) -> JobProfile | None:
    profile = top.child("job_profile", _JOB_PROFILE_KEYS)
    if profile is None:
        return None
    return JobProfile(
        **{key: profile.signal(key) for key in _JOB_PROFILE_KEYS if key != "activity"},
        activity=activity_of(profile),
    )


def _parse_gpu(path: str, where: str, data: Any) -> ScenarioGpu:
    gpu = ObjectReader(path, data, where, _GPU_KEYS)
    uuid = _uuid(gpu, _GPU_UUID, "GPU")
    name = gpu.string("name", required=True)
    assert name is not None
    mig_mode = _mig_mode(gpu)
    mig_devices = tuple(_parse_mig(path, w, item) for w, item in gpu.items("mig_devices"))
    if mig_devices:
        if mig_mode is None:
            raise gpu.error("mig_devices", "mig_devices needs mig_mode (e.g. [1, 1])")
        if mig_mode[0] != 1:
            raise gpu.error("mig_devices", "mig_devices needs MIG mode on: mig_mode [1, ...]")
        if len(mig_devices) > MAX_MIG_DEVICES:
            raise gpu.error("mig_devices", f"at most {MAX_MIG_DEVICES} MIG devices per GPU")
        _check_unique(
            path,
            [
                (f"{gpu.field('mig_devices')}[{j}]", (m.gpu_instance_id, m.compute_instance_id))
                for j, m in enumerate(mig_devices)
            ],
            "(gpu_instance_id, compute_instance_id)",
        )
    for j, mig in enumerate(mig_devices):
        if mig.activity is not None:
            needs_hopper(gpu, f"{gpu.field('mig_devices')}[{j}].activity")
    clocks = gpu.child("clocks_mhz", _CLOCK_KEYS)
    max_clocks = gpu.child("max_clocks_mhz", _CLOCK_KEYS)
    readings = {key: gpu.signal(key) for key in _READINGS}
    return ScenarioGpu(
        name=name,
        uuid=uuid,
        pci_bus_id=_pci_bus_id(gpu),
        serial=gpu.string("serial"),
        memory_total_mib=gpu.integer("memory_total_mib", minimum=1),
        memory_reserved_mib=gpu.integer("memory_reserved_mib", minimum=0),
        power_limit_w=gpu.number("power_limit_w"),
        max_clocks_mhz=MaxClocks(
            **{k: max_clocks.integer(k) for k in _CLOCK_KEYS} if max_clocks else {}
        ),
        cuda_compute_capability=compute_capability(gpu),
        multiprocessor_count=gpu.integer("multiprocessor_count", minimum=1),
        performance_state=gpu.integer("performance_state", allowed=(*range(16), 32)),
        persistence_mode=gpu.flag("persistence_mode"),
        display_active=gpu.flag("display_active"),
        compute_mode=gpu.integer("compute_mode", allowed=(0, 1, 2, 3)),
        ecc_uncorrected_volatile=gpu.integer("ecc_uncorrected_volatile"),
        bar1_total_mib=gpu.integer("bar1_total_mib", minimum=1),
        nvlink_count=gpu.integer("nvlink_count", maximum=255),
        clocks_mhz=ClockSignals(**{k: clocks.signal(k) for k in _CLOCK_KEYS} if clocks else {}),
        processes=_parse_processes(gpu),
        mig_mode=mig_mode,
        mig_devices=mig_devices,
        lost_after_s=gpu.number("lost_after_s"),
        no_permission=_function_names(gpu, "no_permission"),
        function_errors=_function_errors(gpu, "function_errors"),
        accounting_mode=gpu.flag("accounting_mode"),
        activity=hopper_activity(gpu),
        clock_event_reasons=clock_event_reasons(gpu),
        health=health(gpu),
        **readings,
    )


def _uuid(reader: ObjectReader, form: re.Pattern[str], kind: str) -> str:
    uuid = reader.string("uuid", required=True)
    assert uuid is not None
    if not form.fullmatch(uuid):
        form_text = f"{kind}-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, hex"
        raise reader.error("uuid", f"{uuid!r} is not a {kind} uuid ({form_text})")
    return uuid


def _parse_mig(path: str, where: str, data: Any) -> ScenarioMigDevice:
    mig = ObjectReader(path, data, where, _MIG_KEYS)
    uuid = _uuid(mig, _MIG_UUID, "MIG")
    gpu_instance_id = mig.integer("gpu_instance_id", required=True)
    compute_instance_id = mig.integer("compute_instance_id", required=True)
    assert gpu_instance_id is not None and compute_instance_id is not None
    return ScenarioMigDevice(
        uuid=uuid,
        gpu_instance_id=gpu_instance_id,
        compute_instance_id=compute_instance_id,
        memory_total_mib=mig.integer("memory_total_mib", minimum=1),
        memory_used_mib=mig.signal("memory_used_mib"),
        multiprocessor_count=mig.integer("multiprocessor_count", minimum=1),
        profile=mig.string("profile"),
        processes=_parse_processes(mig),
        activity=activity_of(mig),
    )


def _parse_processes(owner: ObjectReader) -> tuple[ScenarioProcess, ...]:
    processes = []
    seen: dict[int, str] = {}
    for where, item in owner.items("processes"):
        process = ObjectReader(owner.path, item, where, _PROCESS_KEYS)
        pid = process.integer("pid", required=True, maximum=PID_MAX)
        assert pid is not None
        if pid in seen:
            raise process.error(
                "pid", f"pid {pid} is already listed at {seen[pid]} (use type 'C+G' for both)"
            )
        seen[pid] = where
        kind = process.string("type") or "C"
        if kind not in PROCESS_TYPES:
            raise process.error("type", f"must be one of {', '.join(PROCESS_TYPES)}, got {kind!r}")
        processes.append(
            ScenarioProcess(
                pid=pid,
                type=kind,
                used_memory_mib=process.signal("used_memory_mib"),
                sm_util=process.signal("sm_util"),
                mem_util=process.signal("mem_util"),
                user=process.string("user"),
                cmd=process.strings("cmd"),
                cpu_percent=process.signal("cpu_percent"),
                host_memory_mib=process.signal("host_memory_mib"),
                started_s_ago=process.number("started_s_ago"),
                env=_environment(process),
            )
        )
    return tuple(processes)


def _environment(process: ObjectReader) -> tuple[tuple[str, str], ...]:
    """``env``: the variables the process was started with, strings only."""
    env = process.child("env", CUDA_ENVIRONMENT)
    if env is None:
        return ()
    names = CUDA_ENVIRONMENT
    return tuple((name, value) for name in names if (value := env.string(name)) is not None)


def _pci_bus_id(gpu: ObjectReader) -> str | None:
    """NVML's form, ``00000000:1B:00.0``; the 4-digit domain of ``lspci -D`` is accepted."""
    value = gpu.string("pci_bus_id")
    if value is None:
        return None
    match = _PCI_BUS_ID.fullmatch(value)
    if match is None:
        raise gpu.error("pci_bus_id", f"{value!r} is not a PCI bus id like '00000000:1B:00.0'")
    domain = int(match["domain"], 16)
    return f"{domain:08X}:{match['bus'].upper()}:{match['device'].upper()}.{match['function']}"


def _mig_mode(gpu: ObjectReader) -> tuple[int, int] | None:
    value = gpu.data.get("mig_mode")
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise gpu.error("mig_mode", f"must be [current, pending], got {value!r}")
    current = gpu.check_integer("mig_mode[0]", value[0], allowed=(0, 1))
    pending = gpu.check_integer("mig_mode[1]", value[1], allowed=(0, 1))
    return (current, pending)


def _function_names(reader: ObjectReader, key: str) -> frozenset[str]:
    names = reader.strings(key)
    for i, name in enumerate(names):
        if not name.startswith("nvml"):
            raise ScenarioError(
                reader.path,
                f"{name!r} is not an NVML function name (they start with 'nvml')",
                f"{reader.field(key)}[{i}]",
            )
    return frozenset(names)


def _function_errors(reader: ObjectReader, key: str) -> dict[str, int]:
    """``{"nvmlX": "NO_PERMISSION"}`` -> ``{"nvmlX": NVML_ERROR_NO_PERMISSION}``."""
    value = reader.data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise reader.error(key, "must be an object mapping NVML function names to error names")
    errors: dict[str, int] = {}
    for name, error in value.items():
        where = f"{reader.field(key)}.{name}"
        if not name.startswith("nvml"):
            raise ScenarioError(
                reader.path,
                f"{name!r} is not an NVML function name (they start with 'nvml')",
                where,
            )
        code = getattr(pynvml, f"NVML_ERROR_{error}", None) if isinstance(error, str) else None
        if not isinstance(code, int) or code == 0:
            raise ScenarioError(
                reader.path,
                f"{error!r} is not an NVML error name (e.g. NOT_SUPPORTED, NO_PERMISSION, "
                "GPU_IS_LOST, LIBRARY_NOT_FOUND, NOT_FOUND, UNKNOWN)",
                where,
            )
        errors[name] = code
    return errors


def _check_unique(path: str, located: list[tuple[str, Any]], what: str) -> None:
    first_at: dict[Any, str] = {}
    for where, value in located:
        if value in first_at:
            raise ScenarioError(
                path, f"duplicate {what} {value!r}: {first_at[value]} has it too", where
            )
        first_at[value] = where


def _check_numbers(path: str, value: Any, where: str) -> None:
    """Every number in the file finite and at most MAX_SCENARIO_NUMBER in size, or a
    ScenarioError naming its JSON location (Python's json reads ``NaN``, ``Infinity`` and
    ``1e999`` without complaint)."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            spelled = "NaN" if math.isnan(value) else ("-" if value < 0 else "") + "Infinity"
            raise ScenarioError(path, f"must be a finite number, got {spelled}", where or None)
        if abs(value) > MAX_SCENARIO_NUMBER:
            shown = (
                f"{value:g}" if isinstance(value, float) else f"a {len(str(value))}-digit number"
            )
            bound = f"{MAX_SCENARIO_NUMBER:.0f}"  # as a person types it, not 1e+12
            raise ScenarioError(
                path, f"must be from -{bound} to {bound}, got {shown}", where or None
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            if not str(key).startswith("_"):
                _check_numbers(path, item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_numbers(path, item, f"{where}[{index}]")
