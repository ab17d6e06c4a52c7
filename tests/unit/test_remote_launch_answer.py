"""The lab's launch dialog tells what the host answered (``gputop run --json`` there): the
job and its cards where the answer is one gputop wrote; the host's own words (cleaned, cut)
where it is not: a million card indices, a 400-digit id, text or nesting where numbers
belong never become the toast."""

from __future__ import annotations

import json

import pytest

from gputop.core.remote.remote_jobs import RemoteResult, launch_answer


def test_a_job_gputop_launched_is_named_with_its_cards() -> None:
    answer = RemoteResult(True, json.dumps({"id": 7, "gpus": [0, 3]}), "")
    assert launch_answer("gpu1", answer) == "Job 7 launched on gpu1, GPU 0,3"


HOSTILE = [
    json.dumps({"id": 7, "gpus": list(range(1_000_000))}),
    '{"id": ' + "9" * 400 + ', "gpus": [0]}',
    json.dumps({"id": "7; rm -rf ~", "gpus": [0]}),
    json.dumps({"id": 7, "gpus": "0123456789" * 1000}),
    json.dumps({"id": 7, "gpus": [[[0]]]}),
    json.dumps({"id": 7.5, "gpus": [0]}),
    json.dumps({"id": True, "gpus": [0]}),
    '{"id": 7, "gpus": [1e999]}',
    json.dumps({"id": 0, "gpus": [-1]}),
    "[" * 100_000,
    json.dumps([1, 2]),
    "not json \x1b[2J",
]


@pytest.mark.parametrize("stdout", HOSTILE, ids=range(len(HOSTILE)))
def test_an_answer_no_gputop_wrote_is_told_in_the_hosts_words(stdout: str) -> None:
    said = launch_answer("gpu1", RemoteResult(True, stdout, "launched, the host says"))
    assert said == "Launched on gpu1: launched, the host says"
