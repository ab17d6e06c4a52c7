"""The lab decodes a host's jobs once per list it sends, not at every redraw: a host sends
its jobs only when they change, and a host with many jobs cost every redraw their decoding."""

from __future__ import annotations

import dataclasses

import pytest
from helpers.lab_dashboard import first_lab_sample, make_lab_app

from gputop.tui.lab import lab_app
from gputop.tui.lab.fixed_hosts import lab_statuses


async def test_a_hosts_jobs_are_decoded_once_until_it_sends_new_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    records = [{"id": n, "name": f"job {n}", "status": "exited"} for n in range(1, 4)]
    statuses = [dataclasses.replace(s, jobs=records) for s in lab_statuses(2)]
    calls: list[str] = []
    decode = lab_app.host_jobs

    def counted(position, host, jobs, local=False):  # type: ignore[no-untyped-def]
        calls.append(host)
        return decode(position, host, jobs, local)

    monkeypatch.setattr(lab_app, "host_jobs", counted)
    app = make_lab_app(statuses)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        for _ in range(3):
            app._show_lab(statuses)
        assert sorted(calls) == sorted(s.host for s in statuses)
        assert [j.id for j in app.remote_jobs] == [1, 2, 3, 1, 2, 3]
        newer = [dataclasses.replace(statuses[0], jobs=[*records, {"id": 4}]), statuses[1]]
        app._show_lab(newer)
        assert calls.count(statuses[0].host) == 2 and calls.count(statuses[1].host) == 1
        assert [j.id for j in app.remote_jobs] == [1, 2, 3, 4, 1, 2, 3]
