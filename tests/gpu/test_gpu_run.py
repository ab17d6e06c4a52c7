"""``gputop run --gpus X -- <the probe>``: the job sees exactly the pinned cards, and what
its supervisor recorded (peak memory, GPU-seconds, energy) matches the probe and the
driver's own energy counter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpu.driver import DRIVER

if not DRIVER.present:
    pytest.skip(DRIVER.reason, allow_module_level=True)

from gpu import compare
from gpu.conftest import PROBE, known_uuids, overhead_mib, smi_list, smi_query
from gpu.cuda_probe import energy_mj

HELD_BYTES = 512 << 20
HOLD_S = 10.0
POLL_S = 0.5
GPU_SECONDS_SLACK_S = 2 * POLL_S + 3.0
"""The supervisor counts a card from the first poll that sees the process (its context made
on that card) to the last (after the free): two polls and context set-up/teardown."""
GPU_SECONDS_SHORT_S = 2 * POLL_S + 2.0
"""A card's context may be made up to a couple of seconds after the first allocation began
(the cards are taken one after the other)."""


def _gputop(environ: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"gputop {' '.join(args)}: {done.returncode}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One job pinned to two cards in reverse order (one where the machine has one)."""
    folder = tmp_path_factory.mktemp("run")
    gpus = [gpu for gpu in smi_list() if not gpu["migs"]]
    if not gpus:
        pytest.skip("every GPU is in MIG mode: gputop run --gpus on a whole card needs one without")
    pinned = [gpus[-1], gpus[0]] if len(gpus) > 1 else [gpus[0]]
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUTOP_FAKE")
    }
    environ["GPUTOP_STATE_DIR"] = str(folder / "state")
    environ["GPUTOP_USAGE_POLL_S"] = str(POLL_S)
    ready, done = folder / "ready.json", folder / "done.json"
    energy_before = {gpu["uuid"]: energy_mj(gpu["uuid"]) for gpu in pinned}
    window_start = time.time()
    launched = json.loads(
        _gputop(
            environ,
            "run",
            "--json",
            "--gpus",
            ",".join(str(gpu["index"]) for gpu in pinned),
            "--",
            sys.executable,
            str(PROBE),
            "hold",
            "--all",
            "--bytes",
            str(HELD_BYTES),
            "--ready",
            str(ready),
            "--done",
            str(done),
            "--seconds",
            str(HOLD_S),
        ).stdout
    )
    waited = subprocess.run(
        [sys.executable, "-m", "gputop", "jobs", "wait", str(launched["id"]), "--timeout", "300"],
        capture_output=True, text=True, env=environ, timeout=400, check=False,
    )  # fmt: skip
    window_end = time.time()
    energy_after = {gpu["uuid"]: energy_mj(gpu["uuid"]) for gpu in pinned}
    jobs = json.loads(_gputop(environ, "jobs", "--json").stdout)
    record = next(j for j in jobs if j["id"] == launched["id"])
    return {
        "pinned": pinned,
        "record": record,
        "ready": json.loads(ready.read_text()) if ready.exists() else None,
        "done": json.loads(done.read_text()) if done.exists() else None,
        "energy_before": energy_before,
        "energy_after": energy_after,
        "window_s": window_end - window_start,
        "power_limit_w": {u: r["power.limit"] for u, r in smi_query().items()},
        "log": f"jobs wait: {waited.returncode} {waited.stdout.strip()}; the job's log: "
        + Path(record["log_path"]).read_text(errors="replace")[-2000:],
    }


def test_run_job_sees_exactly_the_pinned_cards(result, job) -> None:
    assert job["ready"] is not None and "error" not in job["ready"], job["log"]
    seen = compare.name_cuda_uuids(job["ready"]["enumeration"]["uuids"], known_uuids(smi_list()))
    pinned = [gpu["uuid"] for gpu in job["pinned"]]
    result.numbers["--gpus"] = ",".join(str(gpu["index"]) for gpu in job["pinned"])
    result.numbers["env"] = job["record"]["env"]
    result.comparisons.append(
        compare.Comparison(
            "cuda:N the job enumerated", pinned, seen, "exact, in order", seen == pinned
        )
    )
    assert not result.failed, [c.to_json() for c in result.failed]


def test_run_usage_matches_probe_and_energy_counter(result, job) -> None:
    record, ready, done = job["record"], job["ready"], job["done"]
    assert record["usage"] is not None, record.get("usage_note")
    assert ready is not None and done is not None, job["log"]
    held_s = done["released_at"] - ready["allocated_at"]
    job_s = (record["ended_at"] or 0) - (record["started_at"] or 0)
    result.numbers.update({"probe held s": held_s, "job ran s": job_s, "backend": ready["backend"]})
    cards = {card["uuid"]: card for card in record["usage"]["per_card"]}
    for gpu in job["pinned"]:
        card = cards.get(gpu["uuid"])
        label = f"GPU {gpu['index']}"
        if card is None:
            result.comparisons.append(
                compare.Comparison(f"{label} usage", None, "a card entry", "exact", False)
            )
            continue
        peak = card["peak_memory_bytes"]
        result.comparisons.append(
            compare.Comparison(
                f"{label} peak memory MiB",
                None if peak is None else peak / compare.MIB,
                HELD_BYTES / compare.MIB,
                f"from the amount held to that + {overhead_mib():g} MiB",
                peak is not None
                and HELD_BYTES <= peak <= HELD_BYTES + overhead_mib() * compare.MIB,
            )
        )
        result.comparisons.append(
            compare.Comparison(
                f"{label} GPU-seconds",
                card["gpu_seconds"],
                held_s,
                f"from the hold - {GPU_SECONDS_SHORT_S:g} s "
                f"to the hold + {GPU_SECONDS_SLACK_S:g} s",
                held_s - GPU_SECONDS_SHORT_S <= card["gpu_seconds"] <= held_s + GPU_SECONDS_SLACK_S,
            )
        )
        before, after = job["energy_before"][gpu["uuid"]], job["energy_after"][gpu["uuid"]]
        if before is None or after is None:
            result.comparisons.append(
                compare.Comparison(
                    f"{label} energy J",
                    card["energy_j"],
                    None,
                    "none where the driver has none",
                    card["energy_j"] is None,
                )
            )
            continue
        # The check's window holds the job's: the job's energy is at most the window's, and
        # at least that less the card's power limit over the time outside the job.
        window_j = (after - before) / 1000.0
        limit_w = job["power_limit_w"].get(gpu["uuid"]) or 1000.0
        outside_s = max(0.0, job["window_s"] - job_s)
        low, high = window_j - limit_w * outside_s - 1.0, window_j * 1.01 + 1.0
        energy = card["energy_j"]
        result.comparisons.append(
            compare.Comparison(
                f"{label} energy J",
                energy,
                [round(low, 1), round(high, 1)],
                "the counter over the check's window, less the power limit times the time "
                "outside the job",
                energy is not None and low <= energy <= high,
            )
        )
    assert result.comparisons
    assert not result.failed, [c.to_json() for c in result.failed]
