"""A host's jobs are decoded in the core: every field of another machine's record checked
where it enters, so the lab's panels and screens read typed jobs, never a server's dict."""

from __future__ import annotations

import math

from gputop.core import job_columns
from gputop.core.job_columns import HostJob
from gputop.core.remote.host_jobs import host_jobs


def test_a_hosts_record_becomes_a_job_the_columns_read_as_a_local_one() -> None:
    record = {"id": 7, "name": "train", "status": "running", "status_text": "running",
              "gpus": [2, 0], "pid": 4242, "command_text": "python train.py",
              "created_at": 100.0, "started_at": 110.0, "ended_at": None}  # fmt: skip
    (job,) = host_jobs(1, "node1", [record], local=True)
    assert job == HostJob(1, "node1", 7, "train", "running", "running", (2, 0), 4242,
                          "python train.py", 100.0, 110.0, None, None, True)  # fmt: skip
    assert job.ssh_host is None and job.active
    shown = dict(zip((c.short for c in job_columns.COLUMNS),
                     job_columns.texts(job, 200.0, False), strict=True))  # fmt: skip
    assert shown["GPUS"] == "2,0"
    assert shown["DURATION"] == "1m"
    assert shown["GPU TIME"] == shown["PEAK"] == shown["SM ACT"] == "-"


def test_what_no_job_has_is_left_out_or_unknown() -> None:
    records = [
        "not a record",
        {"id": True},
        {"id": -1},
        {"id": "3"},
        {"id": 2**64},
        {"id": 5, "status": None, "gpus": [1, -2, True, "3", 2**70], "pid": 2**40,
         "started_at": math.nan, "ended_at": -5.0, "created_at": math.inf},
    ]  # fmt: skip
    (job,) = host_jobs(0, "node2", records)
    assert (job.id, job.status, job.status_text) == (5, "?", "?")
    assert job.physical_indices == (1,)
    assert job.pid is None
    assert (job.created_at, job.started_at, job.ended_at) == (0.0, None, None)
    assert job.duration_s(10.0) is None and job.ssh_host == "node2" and not job.active
    assert host_jobs(0, "node2", None) == []
