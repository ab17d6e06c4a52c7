"""The counters and host facts made for every GPU process at every refresh (through
``tuple.__new__``) are the named tuples their constructors make."""

from __future__ import annotations

import os

from gputop.core.model import ProcessOrigin
from gputop.core.sampling import proc_counters
from gputop.core.sampling.host_processes import HostFacts, HostProcessTable
from gputop.core.sampling.proc_counters import Counters, StatFiles, read_proc_stat


def _stat_line(fields: list[str]) -> bytes:
    return ("4242 (a) b (c)) " + " ".join(fields)).encode()


def test_a_stat_lines_counters_are_the_named_tuple_of_its_fields() -> None:
    fields = [str(n * 7) for n in range(1, 50)]
    fields[0] = "S"
    counters = proc_counters._parse_stat(_stat_line(fields))
    ticks, page = proc_counters.TICKS_PER_S, proc_counters._PAGE_BYTES
    want = Counters(
        cpu_time_s=(int(fields[11]) + int(fields[12])) / ticks,
        rss_bytes=int(fields[21]) * page,
        start_mark=float(fields[19]),
    )
    assert type(counters) is Counters and counters == want
    assert counters._asdict() == want._asdict()
    files = StatFiles()
    try:
        for _ in range(2):  # opened, then read again through the kept file
            own, fresh = files(os.getpid()), read_proc_stat(os.getpid())
            assert type(own) is Counters and type(fresh) is Counters
            assert own.start_mark == fresh.start_mark
    finally:
        files.close()


def test_a_live_process_facts_are_the_named_tuple_of_its_facts() -> None:
    table = HostProcessTable()
    for _ in range(2):  # first seen, then from what is kept
        facts = table.describe([os.getpid()])[os.getpid()]
        assert type(facts) is HostFacts and facts.origin is ProcessOrigin.HOST
        assert facts == HostFacts(**facts._asdict())
        assert facts.command and facts.start_ticks is not None
