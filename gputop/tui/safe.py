"""Untrusted text as Rich ``Text`` and Textual ``Content``: cleaned, never read as markup.

Textual reads a ``str`` given to ``Static``, ``Label``, a ``DataTable`` cell, a border title
or ``notify`` as markup: ``exp[/]1`` raises, ``[fast]`` vanishes, ``[@click=app.quit]``
becomes an action. Every widget of gputop that shows a value from outside builds it with
these helpers instead, so the value is cleaned (:mod:`gputop.core.safe_text`) and drawn
exactly as written. See docs/security.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.content import Content

from gputop.core.safe_text import clean, clean_argv


def plain(text: str | None, style: str = "", **options: object) -> Text:
    """A value from outside as Rich ``Text``: cleaned, one line, no markup."""
    return Text(clean(text or ""), style=style, **options)  # type: ignore[arg-type]


def plain_argv(argv: Sequence[str], style: str = "") -> Text:
    """A command line as Rich ``Text``: each argument cleaned, joined by spaces."""
    return Text(clean_argv(list(argv)), style=style)


def plain_content(text: str) -> Content:
    """A value from outside as Textual ``Content`` (border titles): cleaned, no markup."""
    return Content(clean(text))
