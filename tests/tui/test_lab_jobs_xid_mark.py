"""The lab's jobs panel marks a job whose cards had an Xid while it ran, as the local panel
does (``running ✖ Xid 79``): from its own host's cards, their health as that host's agent
sent it. A job on another card, one that ended before the Xid, and a job on the same card
index of another host are not marked. docs/lab.md."""

from __future__ import annotations

import copy
from typing import Any

from helpers.hostile_hosts import GOOD, NOW, agent_lines, replay
from helpers.lab_dashboard import first_lab_sample, make_lab_app

from gputop.core.remote.status import HostStatus
from gputop.tui.lab.lab_app import LabApp
from gputop.tui.lab.lab_jobs import COLUMNS, LabJobsPanel

XID_AT = NOW - 60


def host(name: str, jobs: list[dict[str, Any]], xid_on: int | None = None) -> HostStatus:
    """A host as decoded from its agent's lines: an Xid 79 on card ``xid_on`` a minute ago."""
    document = copy.deepcopy(GOOD)
    for gpu in document["gpus"]:
        if gpu["index"] == xid_on:
            gpu["health"]["xid_events"] = [{"xid": 79, "time": XID_AT, "count": 1}]
            gpu["health"]["xid_counts"] = {"79": 1}
    return replay(name, agent_lines(document, jobs=jobs))


def job(job_id: int, card: int, started: float, ended: float | None = None) -> dict[str, Any]:
    status = "running" if ended is None else "exited"
    return {
        "id": job_id,
        "name": f"train{job_id}",
        "status": status,
        "status_text": status if ended is None else "exited 0",
        "gpus": [card],
        "created_at": started,
        "started_at": started,
        "ended_at": ended,
    }


def status_of(app: LabApp, position: int, job_id: int) -> str:
    panel = app.query_one(LabJobsPanel)
    cells = dict(zip(COLUMNS, (str(c) for c in panel.get_row(f"{position}:{job_id}")), strict=True))
    return cells["STATUS"]


async def test_a_hosts_job_whose_card_had_an_xid_is_marked_from_that_hosts_cards() -> None:
    jobs = [
        job(1, 1, NOW - 600),  # on the card, running when the Xid came: marked
        job(2, 0, NOW - 600),  # on another card: not marked
        job(3, 1, NOW - 900, ended=NOW - 300),  # ended before the Xid: not marked
        job(4, 1, NOW - 120, ended=NOW - 30),  # ran through it and ended: marked
    ]
    with_xid = host("gpu01", jobs, xid_on=1)
    same_cards = host("gpu02", [job(1, 1, NOW - 600), job(4, 1, NOW - 120, ended=NOW - 30)])
    assert with_xid.snapshot is not None and with_xid.snapshot.gpus[1].health is not None
    assert with_xid.snapshot.gpus[1].health.xid_events  # the Xid came through the wire
    app = make_lab_app([with_xid, same_cards])
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        await pilot.press("J")
        await pilot.pause()

        assert status_of(app, 0, 1) == "running ✖ Xid 79"
        assert status_of(app, 0, 4) == "exited 0 ✖ Xid 79"
        assert status_of(app, 0, 2) == "running"
        assert status_of(app, 0, 3) == "exited 0"
        # the same card index on the other host had no Xid: its jobs are not marked
        assert status_of(app, 1, 1) == "running"
        assert status_of(app, 1, 4) == "exited 0"


async def test_a_job_recorded_with_its_cards_uuids_is_marked_by_uuid() -> None:
    uuid = GOOD["gpus"][1]["uuid"]
    on_uuid = {**job(1, 0, NOW - 600), "uuids": [uuid]}  # index 0 but the uuid of card 1
    app = make_lab_app([host("gpu01", [on_uuid, {**job(2, 1, NOW - 600), "uuids": []}], 1)])
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)

        assert status_of(app, 0, 1) == "running ✖ Xid 79"
        assert status_of(app, 0, 2) == "running ✖ Xid 79"  # no uuids: by its index
