"""A lab host's hostile job records, as its agent's jobs line brings them: texts of megabytes,
a command that is a nested list instead of a text, ids of 400 digits, NaN times. Each text is
cut where it is decoded, as every other text a host sends (protocol.MAX_TEXT_CHARS), and what
is not a text is none, never its Python repr."""

from __future__ import annotations

import math

from helpers.hostile_hosts import agent_lines, good_document, replay

from gputop.core.remote.host_jobs import host_jobs
from gputop.core.remote.protocol import MAX_TEXT_CHARS

MEGABYTE = "x" * 1_000_000


def jobs_from(records: list[object]) -> list:
    status = replay("gpu1", agent_lines(good_document(), jobs=records))
    return host_jobs(0, "gpu1", status.jobs)


def test_a_megabyte_of_text_is_cut_where_it_is_decoded() -> None:
    texts = {"name": MEGABYTE, "status_text": MEGABYTE, "command_text": MEGABYTE}
    (job,) = jobs_from([{"id": 1, "status": "running", **texts}])
    assert len(job.name) == len(job.status_text) == len(job.command_text) == MAX_TEXT_CHARS


def test_a_command_that_is_not_a_text_is_none_not_its_repr() -> None:
    nested: list[object] = []
    for _ in range(500):
        nested = [nested]
    (deep, long) = jobs_from(
        [{"id": 1, "command_text": nested}, {"id": 2, "command_text": list(range(100_000))}]
    )
    assert deep.command_text == long.command_text == ""  # was '[[[[…' and 600 KB of digits


def test_ids_of_400_digits_and_nan_times_are_left_out_or_unknown() -> None:
    jobs = jobs_from(
        [{"id": int("9" * 400)}, {"id": 3, "created_at": math.nan, "started_at": math.inf}]
    )
    assert [(j.id, j.created_at, j.started_at) for j in jobs] == [(3, 0.0, None)]
