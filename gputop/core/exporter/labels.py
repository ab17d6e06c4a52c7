"""Label values from outside gputop, cleaned and bounded before they reach an exposition.

prometheus_client escapes quotes, backslashes and newlines itself, so no value can break
the text format; what it leaves alone (escape sequences, C1 controls, bidirectional
overrides, bytes that are not UTF-8) would still reach a terminal or a Grafana panel as they
are. Every value therefore passes the one sanitiser first (gputop/core/safe_text.py) and is
cut to a bound, so a command line of a megabyte is one short series, not a huge one.

A command line goes to whoever can reach the exporter (on loopback, every local user: see
docs/security.md), so it is written as ``--command-label`` says: ``redacted`` (the
default: gputop/core/redact.py takes its secrets out), ``name`` (the program's name only)
or ``none`` (an empty label).
"""

from __future__ import annotations

from gputop.core.redact import COMMAND_FORMS, CommandForm, argv_for_others, redacted_args
from gputop.core.safe_text import clean, clean_argv

MAX_LABEL_CHARS = 128
"""The longest label value gputop writes (a command is cut to this, with an ellipsis)."""
ELLIPSIS = "…"
MAX_REDACTED_ARG_CHARS = 4096
"""Each shown argument is redacted whole up to this: a token cut before redaction could
show its first characters."""
CommandLabel = CommandForm
COMMAND_LABELS = COMMAND_FORMS


def label(text: str | None, limit: int = MAX_LABEL_CHARS) -> str:
    """``text`` cleaned and cut to ``limit`` characters; ``""`` (no label) for ``None``."""
    if text is None:
        return ""
    # Cleaning can only lengthen the text: cutting first bounds the work for huge values.
    cleaned = clean(text[: limit + 1])
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + ELLIPSIS


def command_label(argv: tuple[str, ...], mode: CommandLabel = "redacted") -> str:
    """A process's command line as one cleaned, bounded label value, as ``mode`` says."""
    if mode == "none" or not argv:
        return ""
    if mode == "name":
        return label(argv_for_others(argv, "name")[0])
    shown: list[str] = []
    length = 0
    # Only the arguments that can show: a long argv costs no more. Each is redacted knowing
    # the ones before it (the value of a secret option that is the last one shown, too).
    for arg in redacted_args(arg[:MAX_REDACTED_ARG_CHARS] for arg in argv):
        shown.append(arg[: MAX_LABEL_CHARS + 1])
        length += len(shown[-1]) + 1
        if length > MAX_LABEL_CHARS:
            break
    text = clean_argv(shown)
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + ELLIPSIS
