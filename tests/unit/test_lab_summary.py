"""A host's summary line: free cards by the pick policy, memory free, busiest user, state."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from gputop.core.free_cards import FreePolicy
from gputop.core.remote.host_summary import active_job_gpus, summarize
from gputop.core.remote.status import HostStatus, LinkState, Mode
from gputop.core.remote.transport import Failure
from gputop.tui.lab.fixed_hosts import simulated_status
from gputop.tui.lab.host_line import _segments, memory_free_text, summary_line


def test_free_cards_follow_the_pick_policy_with_the_hosts_own_user() -> None:
    status = simulated_status("gpu1", "v100x4", user="ubuntu")

    summary = summarize(status, FreePolicy(), local_user="somebody-else")

    assert (summary.free_cards, summary.gpu_count) == (2, 4)
    assert summary.busiest_user == "ubuntu"
    assert summary.memory_free_bytes == sum(
        g.memory_free_bytes or 0
        for g in status.snapshot.gpus  # type: ignore[union-attr]
    )


def test_an_active_job_of_the_host_takes_its_card() -> None:
    free = summarize(simulated_status("gpu1", "v100x4"), FreePolicy(), "alice").free_cards
    job = {"id": 3, "status": "running", "gpus": [2]}

    claimed = summarize(simulated_status("gpu1", "v100x4", jobs=[job]), FreePolicy(), "alice")

    assert claimed.free_cards == free - 1


def test_malformed_job_records_claim_nothing() -> None:
    records = [{"id": "x", "status": "running", "gpus": [0]}, "junk", {"status": "running"}]

    assert active_job_gpus(records) == {}  # type: ignore[arg-type]


def test_the_state_says_stale_reduced_and_unreachable_in_a_few_words() -> None:
    stale = simulated_status("a", "v100x4", state=LinkState.STALE, stale_for_s=7.0)
    reduced = simulated_status("b", "v100x4", mode=Mode.REDUCED)
    down = HostStatus("c", LinkState.UNREACHABLE, failure=Failure("refused", "connection refused"))

    texts = [summarize(s, FreePolicy(), "alice").state_text for s in (stale, reduced, down)]

    assert texts == ["stale for 7 s", "live, reduced mode", "unreachable: connection refused"]


def test_the_summary_line_cleans_the_host_name_and_the_user() -> None:
    status = simulated_status("gpu\x1b]0;owned\x07", "v100x4", user="ubuntu")
    summary = summarize(status, FreePolicy(), "alice")

    line = summary_line(summary, expanded=True, highlighted=False, width=200).plain

    assert "\x1b" not in line and "\x07" not in line
    assert line.startswith("▾ gpu")
    assert "2/4 free" in line and "top ubuntu" in line


def _cells(segments: list[Segment]) -> list[tuple[str, Style | None]]:
    return [(char, segment.style) for segment in segments for char in segment.text]


@pytest.mark.parametrize("host", ["gpu1", "sérveur-ü", "h" * 150, "evil\x1b]0;x\x07"])
@pytest.mark.parametrize("highlighted", [True, False])
@pytest.mark.parametrize("scenario", ["v100x4", "faulty"])
def test_the_summary_line_paints_cell_for_cell_as_rich_renders_it(
    host: str, highlighted: bool, scenario: str
) -> None:
    # The host line paints its spans itself (cheaper than Rich's rendering of a Text):
    # every character and style must be what Rich would give.
    status = simulated_status(host, scenario)
    text = summary_line(summarize(status, FreePolicy(), "alice"), True, highlighted, 120)
    base = Style(color="white", bgcolor="blue")
    console = Console(width=200)
    expected = list(Segment.apply_style(text.render(console), base))
    assert _cells(_segments(text, base, console)) == _cells(expected)


def test_overlapping_spans_are_left_to_rich() -> None:
    text = Text("abcdef")
    text.stylize("bold", 0, 4)
    text.stylize("red", 2, 6)
    base = Style(bgcolor="blue")
    console = Console(width=80)
    expected = list(Segment.apply_style(text.render(console), base))
    assert _cells(_segments(text, base, console)) == _cells(expected)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (66 * 1024**3 + 400 * 1024**2, "66G"),
        (int(65.6 * 1024**3), "66G"),
        (10 * 1024**3, "10G"),
        (int(9.54 * 1024**3), "9.5G"),
        (812 * 1024**2, "812M"),
    ],
)
def test_free_memory_on_a_summary_line_is_whole_gib_from_ten_up(value: int, text: str) -> None:
    assert memory_free_text(value) == text
