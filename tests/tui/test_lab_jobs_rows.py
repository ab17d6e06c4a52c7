"""The lab's jobs panel lists at most MAX_ROWS jobs of every host together: every active job
and the newest ended ones, newest first, and its subtitle says how many there were. Twenty
hosts sending 500 jobs each were 10,000 rows, each made again at every redraw. docs/lab.md."""

from __future__ import annotations

import dataclasses
from typing import Any

from helpers.lab_dashboard import first_lab_sample, make_lab_app

from gputop.tui.lab.fixed_hosts import lab_statuses
from gputop.tui.lab.lab_jobs import MAX_ROWS, LabJobsPanel

NOW = 1_767_225_630.0


def records(count: int, running: int) -> list[dict[str, Any]]:
    """``count`` jobs, oldest first; job ``running`` (an old one) still runs."""
    return [
        {
            "id": n,
            "name": f"j{n}",
            "status": "running" if n == running else "exited",
            "created_at": NOW - 10 * (count - n),
        }
        for n in range(1, count + 1)
    ]


async def test_the_panel_lists_the_active_jobs_and_the_newest_others_of_every_host() -> None:
    per_host = 400
    hosts = [
        dataclasses.replace(status, jobs=records(per_host, running=position + 1))
        for position, status in enumerate(lab_statuses(3))
    ]
    app = make_lab_app(hosts)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        await pilot.press("J")
        await pilot.pause()
        panel = app.query_one(LabJobsPanel)

        assert len(app.remote_jobs) == 3 * per_host  # every job decoded, for the keys
        assert panel.row_count == MAX_ROWS
        for position in range(3):  # each host's old running job is listed
            assert str(panel.get_row(f"{position}:{position + 1}")[4]) == "running"
        subtitle = str(panel.border_subtitle)
        assert subtitle.startswith(f"newest {MAX_ROWS} of 1,200 jobs, 3 active · "), subtitle
        assert "enter log" in subtitle
