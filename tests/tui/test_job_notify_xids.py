"""The supervisor's own end word (``gputop run --notify-command``) names the Xids the job's
cards had while it ran, as ``jobs wait`` and the dashboard's toast do (issue 42): from the
cards its usage meter samples (their health), not from a recorder. A job on a card without
an Xid names none. Real jobs and supervisors on simulated cards on the wall clock."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers.jobs import PYTHON, wait_until_ended
from helpers.scenarios import minimal_gpu

from gputop.cli.main import main

RECORD = (
    "import json, os, sys; json.dump({k: v for k, v in os.environ.items() "
    "if k.startswith('GPUTOP_')}, open(sys.argv[1] + '.tmp', 'w')); "
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1])"
)


def scenario(path: Path) -> str:
    gpus = [
        minimal_gpu(ecc_uncorrected_volatile=0, xid_events=[{"at_s": 0, "xid": 79}]),
        minimal_gpu(uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000", pci_bus_id="00000000:08:00.0"),
    ]
    path.write_text(json.dumps({"description": "an Xid", "gpus": gpus}), encoding="utf-8")
    return str(path)


def notified(out: Path) -> dict[str, str]:
    deadline = time.monotonic() + 30
    while not out.exists():
        assert time.monotonic() < deadline, "the notify command never ran"
        time.sleep(0.05)
    facts: dict[str, str] = json.loads(out.read_text())
    return facts


def test_the_supervisors_end_word_names_the_xids_of_the_jobs_cards(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wall clock: the card's Xid arrives (to the meter's event set) while the job runs.
    monkeypatch.delenv("GPUTOP_FAKE_TIME")
    fake = scenario(tmp_path / "xid.json")
    for job_id, gpu in ((1, "0"), (2, "1")):
        out = tmp_path / f"notified-{job_id}.json"
        notify = f"{PYTHON} -c {json.dumps(RECORD)} {out}"
        argv = ["run", "--fake", fake, "--gpus", gpu, "--notify-command", notify, "--"]
        assert main([*argv, PYTHON, "-c", "raise SystemExit(1)"]) == 0
        wait_until_ended(state_dir, job_id)
        facts = notified(out)
        if gpu == "0":
            assert facts["GPUTOP_JOB_XIDS"] == "79:1"
            assert "failed 1" in facts["GPUTOP_MESSAGE"]
            assert "its GPUs had Xid 79 while it ran" in facts["GPUTOP_MESSAGE"]
        else:
            assert facts["GPUTOP_JOB_XIDS"] == ""
            assert "Xid" not in facts["GPUTOP_MESSAGE"]
