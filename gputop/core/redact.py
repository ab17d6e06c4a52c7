"""The one redactor of secrets in command lines, for every place other people read one.

A command line is the process owner's: ``python train.py --hf-token=hf_…`` shows in their
own dashboard as it is. Where gputop writes it for someone else (the exporter's labels, a
history store shared with ``record --readable-by``, and the reports from it, the lab agent
about another user's processes), it passes ``redact_argv`` (an argv) or ``redact_text`` (a
command line already joined, as a store keeps it) first. docs/security.md lists each place
and its test.

What is taken out, each replaced by ``***``:

- the value of an option whose name holds a secret word (token, key, secret, password,
  passwd, auth, credential): ``--hf-token=V``, ``--hf-token V``, ``-password V``,
  ``-apiKey=V``;
- the value of a ``NAME=V`` argument with such a name (``HF_TOKEN=V``, ``wandb.api_key=V``);
- the value of a header line with such a name (``-H "Authorization: Bearer V"``);
- the user-info of a URL (``https://user:pass@host`` becomes ``https://***@host``);
- tokens known by their shape, wherever they stand: ``hf_``, ``ghp_`` (and GitHub's other
  ``gh?_``), ``github_pat_``, ``glpat-``, ``sk-``, ``xox?-`` (Slack), ``AKIA``/``ASIA``
  (AWS access keys): the prefix stays, to say what was there (``hf_***``).

An argument that holds spaces (``bash -c "… --token V"``) is read word by word as well.
Redacting twice gives the same text as once, and redacting never fails.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Literal

REDACTED = "***"
CommandForm = Literal["redacted", "name", "none"]
"""How a command line is written for others (``--command-label``): its secrets taken out,
its program's name only, or nothing."""
COMMAND_FORMS: tuple[CommandForm, ...] = ("redacted", "name", "none")

MAX_NAME_CHARS = 256
_SECRET_ENDINGS = ("token", "key", "secret", "secrets", "credential", "credentials", "creds")
_SECRET_PARTS = ("secret", "passw", "credential")
_NOT_AUTH = frozenset({"author", "authors", "authored", "authoring"})
_NAME_PARTS = re.compile(r"[-_.:/]+")
_ASSIGNMENT = re.compile(r"^([+~]*[A-Za-z_][A-Za-z0-9_.\-]*)=(.*)$", re.DOTALL)
_OPTION = re.compile(r"^(-{1,2}[A-Za-z0-9][A-Za-z0-9_.\-]*)(=(.*))?$", re.DOTALL)
# From "://" on only: a pattern that matched the scheme too would try every letter of a long
# word as a scheme's start, and take time in the square of its length.
_URL_USERINFO = re.compile(r"://[^/\s@?#]+@")
# Known token shapes; the prefix (group 1 or 3) is kept. Not after a letter or digit (so
# "mask-rcnn-…" keeps its "sk-"), except after an escape the sanitiser wrote (\n, \x07…):
# checked on what precedes a match (_after_a_word), which keeps the pattern a plain scan.
_TOKENS = re.compile(
    r"(hf_|gh[pousr]_|github_pat_|glpat-|sk-|xox[a-z]-)[A-Za-z0-9_\-]{8,}"
    r"|(AKIA|ASIA)[A-Z0-9]{16}"
)
_ESCAPE_BEFORE = re.compile(r"\\(?:[nrte]|x[0-9a-f]{2}|u[0-9a-f]{4})$")
_SPACES = re.compile(r"(\s+)")
_HEADER = re.compile(r"^([A-Za-z][A-Za-z0-9_\-]*):$")
_SCHEMES = frozenset({"bearer", "basic", "token", "digest"})
"""Words of an ``Authorization:`` value that come before the secret itself."""


def secret_name(name: str) -> bool:
    """Whether an option or variable called ``name`` holds a secret by its name (one
    longer than any real name is taken as one: redacting it costs nothing)."""
    if len(name) > MAX_NAME_CHARS:
        return True
    for part in _NAME_PARTS.split(name.lower()):
        if not part:
            continue
        if part.endswith(_SECRET_ENDINGS) or any(word in part for word in _SECRET_PARTS):
            return True
        if (part.startswith("auth") and part not in _NOT_AUTH) or part.endswith("auth"):
            return True
    return False


def _shapes(text: str) -> str:
    """Known token shapes and URL user-info taken out of ``text``, wherever they are."""
    text = _URL_USERINFO.sub("://" + REDACTED + "@", text)
    return _TOKENS.sub(lambda m: _token(m, text), text)


def _token(match: re.Match[str], text: str) -> str:
    start = match.start()
    inside_a_word = start > 0 and text[start - 1].isascii() and text[start - 1].isalnum()
    if inside_a_word and not _ESCAPE_BEFORE.search(text, max(0, start - 6), start):
        return match.group()  # "mask-rcnn-…"
    return (match.group(1) or match.group(2)) + REDACTED


def _word(text: str) -> tuple[str, bool]:
    """One word redacted; and whether it is an option whose value is the next word.
    Quotes around it (a shell command in one argument) are kept and looked past."""
    word = text.strip("\"'")
    if not word:
        return text, False
    start = text.index(word)
    redacted, value_next = _unquoted_word(word)
    return text[:start] + redacted + text[start + len(word) :], value_next


def _unquoted_word(word: str) -> tuple[str, bool]:
    option = _OPTION.match(word)
    if option is not None:
        name, has_value, value = option.group(1), option.group(2), option.group(3)
        if secret_name(name.lstrip("-")):
            if has_value is None:
                return word, True
            return (f"{name}={REDACTED}" if value else word), False
        header = _HEADER.match(value or "")
        if header is not None and secret_name(header.group(1)):  # --header=Authorization: V
            return word, True
        return _shapes(word), False
    header = _HEADER.match(word)
    if header is not None and secret_name(header.group(1)):
        return word, True
    assignment = _ASSIGNMENT.match(word)
    if assignment is not None and secret_name(assignment.group(1).lstrip("+~")):
        return (f"{assignment.group(1)}={REDACTED}" if assignment.group(2) else word), False
    return _shapes(word), False


def _takes_value(word: str) -> bool:
    """Whether the word after a secret option is its value (not the next option)."""
    return not word.startswith("--")


def redact_text(text: str) -> str:
    """A command line as one string (words separated by blanks), its secrets taken out."""
    return _redact_words(text, False)[0]


def _redact_words(text: str, value_next: bool) -> tuple[str, bool]:
    """``text`` word by word; ``value_next``: its first word is a secret option's value.
    Gives whether the word after ``text`` is one."""
    pieces = _SPACES.split(text)
    for position in range(0, len(pieces), 2):  # even positions are words, odd are blanks
        word = pieces[position]
        if not word:
            continue
        if value_next and _takes_value(word):
            value_next = word.lower() in _SCHEMES  # "Authorization: Bearer V": V as well
            pieces[position] = word if value_next else REDACTED
            continue
        pieces[position], value_next = _word(word)
    return "".join(pieces), value_next


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """An argv with its secrets taken out, argument by argument (see the module's text)."""
    redacted: list[str] = []
    value_next = False
    for arg in argv:
        if value_next and _takes_value(arg):
            value_next = arg.lower() in _SCHEMES
            redacted.append(arg if value_next else REDACTED)
            continue
        if _SPACES.search(arg):
            text, value_next = _redact_words(arg, False)
            redacted.append(text)
            continue
        word, value_next = _word(arg)
        redacted.append(word)
    return tuple(redacted)


def argv_for_others(argv: Sequence[str], form: CommandForm = "redacted") -> tuple[str, ...]:
    """An argv as ``form`` writes it for other people (``()`` for ``none``)."""
    if form == "none" or not argv:
        return ()
    if form == "name":
        return redact_argv((os.path.basename(argv[0]),))
    return redact_argv(argv)


def text_for_others(text: str | None, form: CommandForm = "redacted") -> str | None:
    """A command line kept as one string, as ``form`` writes it for other people."""
    if text is None or form == "none":
        return None
    if form == "name":
        first = text.split(maxsplit=1)
        return redact_text(os.path.basename(first[0])) if first else text
    return redact_text(text)
