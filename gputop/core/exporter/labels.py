"""Label values from outside gputop, cleaned and bounded before they reach an exposition.

prometheus_client escapes quotes, backslashes and newlines itself, so no value can break
the text format; what it leaves alone (escape sequences, C1 controls, bidirectional
overrides, bytes that are not UTF-8) would still reach a terminal or a Grafana panel as they
are. Every value therefore passes the one sanitiser first (gputop/core/safe_text.py) and is
cut to a bound, so a command line of a megabyte is one short series, not a huge one.
"""

from __future__ import annotations

from gputop.core.safe_text import clean, clean_argv

MAX_LABEL_CHARS = 128
"""The longest label value gputop writes (a command is cut to this, with an ellipsis)."""
ELLIPSIS = "…"


def label(text: str | None, limit: int = MAX_LABEL_CHARS) -> str:
    """``text`` cleaned and cut to ``limit`` characters; ``""`` (no label) for ``None``."""
    if text is None:
        return ""
    # Cleaning can only lengthen the text: cutting first bounds the work for huge values.
    cleaned = clean(text[: limit + 1])
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + ELLIPSIS


def command_label(argv: tuple[str, ...], limit: int = MAX_LABEL_CHARS) -> str:
    """A process's command line as one cleaned, bounded label value."""
    shown: list[str] = []
    length = 0
    for arg in argv:  # only the arguments that can show: a long argv costs no more
        if length > limit:
            break
        shown.append(arg[: limit + 1])
        length += len(shown[-1]) + 1
    text = clean_argv(shown)
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS
