"""The process table marks a process whose card had an Xid since it started (issue 42,
docs/health.md): ``[Xid 63]`` before its command, red where an Xid is critical, from the
card's health in the snapshot; a process on a healthy card, or whose start is not known, is
not marked. By Pilot on ``--fake faulty`` and an Xid injected while the dashboard runs."""

from __future__ import annotations

from pathlib import Path

from helpers.dashboard import first_sample
from helpers.waiting import pilot_wait_for

from gputop.core.sampling.source import open_backend
from gputop.tui.app import GputopApp
from gputop.tui.screenshots import SCREENSHOT_USER
from gputop.tui.widgets.process_rows import COLUMNS, ProcessRow
from gputop.tui.widgets.process_table import ProcessTable

COMMAND = COLUMNS.index("COMMAND")


def dashboard() -> GputopApp:
    # At 2 s of the scenario: the P100's Xid 63 and the A40's Xid 48 have come, the A40's
    # Xid 79 (4.9 s) and its loss (5 s) not yet.
    backend = open_backend("faulty", environ={"GPUTOP_FAKE_TIME": "2"})
    return GputopApp(backend, interval_s=0.2, probes=False, user=SCREENSHOT_USER, environ={})


def row_of(app: GputopApp, pid: int) -> ProcessRow:
    return next(row for row in app.query_one(ProcessTable).rows if row.process.pid == pid)


async def test_a_process_on_a_card_that_had_an_xid_since_it_started_is_marked(
    tmp_path: Path,
) -> None:
    app = dashboard()
    async with app.run_test(size=(200, 50)) as pilot:
        await first_sample(pilot)
        await pilot_wait_for(
            pilot,
            lambda: any(row.process.pid == 4609001 for row in app.query_one(ProcessTable).rows),
            "the A40's process",
        )
        hana = row_of(app, 4607779)  # on the P100: Xid 63, a warning
        assert hana.text(COMMAND) == "[Xid 63] python legacy_caffe_job.py"
        assert hana.cells[COMMAND][0] == ("[Xid 63] ", "bold yellow")
        ivan = row_of(app, 4609001)  # on the A40: Xid 48, critical
        assert ivan.text(COMMAND).startswith("[Xid 48] python render_nerf.py")
        assert ivan.cells[COMMAND][0][1] == "bold red"
        hidden = row_of(app, 4607777)  # its start is not known: cannot say, not marked
        assert "Xid" not in hidden.text(COMMAND)
        xorg = row_of(app, 4600301)  # on the RTX 3090: no Xid
        assert not xorg.text(COMMAND).startswith("[Xid")
        app.backend.nvml.inject_xid(0, 13)
        await pilot_wait_for(
            pilot,
            lambda: row_of(app, 4600301).text(COMMAND).startswith("[Xid 13] /usr/lib/xorg/Xorg"),
            "the mark of the Xid that arrived",
        )
