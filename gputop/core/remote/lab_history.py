"""A lab host's card history for the dashboard across hosts (``H``): asked of the host's agent
through its link, answered from the host's own history store (docs/lab.md, docs/history.md).

Runs in a worker thread: it waits up to ``timeout_s`` for the answer. Every way it can fail
(reduced mode, not connected, no recorder there, an older agent that never answers) is a
``CardHistory`` whose ``problem`` says so for a person; text from the host is cleaned.
"""

from __future__ import annotations

from gputop.core.history.card_history import CardHistory
from gputop.core.install_advice import install_command
from gputop.core.records import frozen
from gputop.core.remote.agent_history import MAX_COLUMNS, MIN_COLUMNS, is_card_uuid
from gputop.core.remote.agent_version import older_note
from gputop.core.remote.host_link import HostLink
from gputop.core.remote.status import HostStatus, Mode
from gputop.core.safe_text import clean

HISTORY_TIMEOUT_S = 20.0
"""How long the dashboard waits for an agent's answer (a week's report takes a second or two
on a busy host, and the answer follows the agent's next snapshot)."""
MAX_PROBLEM_CHARS = 500


@frozen
class HistoryAsk:
    """What ``H`` asks of a host: card ``physical_index`` over the last ``window_s`` seconds
    (of the host's clock: ``now`` only dates what is returned), in ``columns`` slices,
    waiting up to ``timeout_s`` for the answer."""

    physical_index: int
    window_s: float
    now: float
    columns: int
    timeout_s: float = HISTORY_TIMEOUT_S
    uuid: str | None = None
    """The card's UUID, as the host's last snapshot gave it: the agent finds its history by
    it (``None``: by index alone)."""

    def problem(self, text: str) -> CardHistory:
        """Nothing to show, and why (for a person)."""
        return CardHistory(self.physical_index, self.now - self.window_s, self.now, problem=text)


def remote_card_history(link: object, status: HostStatus, ask: HistoryAsk) -> CardHistory:
    """``ask``, asked of the host behind ``link``."""
    physical_index, now, timeout_s = ask.physical_index, ask.now, ask.timeout_s
    since = now - ask.window_s
    host = clean(status.host)
    problem = ask.problem

    if status.mode is Mode.REDUCED:
        return problem(
            f"{host} runs in reduced mode (nvidia-smi only): there is no gputop there to "
            f"keep a history. Install it ({install_command(status.host)}) and run "
            "'gputop record' there."
        )
    if not isinstance(link, HostLink):
        return problem(
            f"{host} has no gputop agent to ask for a history ({clean(status.describe())})."
        )
    request = link.request_history(
        ask.window_s,
        "user",
        physical_index,
        columns=max(MIN_COLUMNS, min(MAX_COLUMNS, ask.columns)),
        uuid=ask.uuid if is_card_uuid(ask.uuid) else None,  # else by index, as before
    )
    if request is None:
        return problem(
            f"{host} is not connected now ({clean(status.describe())}); try again later."
        )
    answer = link.history_answer(request, timeout_s)
    if answer is None:
        older = older_note(status.host, status.agent_version)
        why = (
            older
            if older is not None
            else "a gputop there older than this one does not answer history requests; "
            f"update it: {install_command(status.host)}"
        )
        return problem(f"No answer from gputop on {host} in {timeout_s:g} s ({why}).")
    if answer.rows is None:
        said = clean(answer.error or "no report in the answer")[:MAX_PROBLEM_CHARS]
        return problem(f"{host}: {said}")
    series = answer.series
    if series is not None and series.physical_index != physical_index:
        series = None  # not the card asked about: a confused or hostile agent
    if series is None and not answer.rows:
        return CardHistory(physical_index, since, now)
    return CardHistory(physical_index, since, now, series, answer.rows)
