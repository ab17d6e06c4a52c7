"""From what a person typed to the argv gputop executes, and a short name for the job.

The rule: a command is split into words as a POSIX shell would (``shlex``) and executed
directly, with no shell in between, so nothing in it is ever interpreted twice. Only when
the text uses something only a shell can do (pipes, redirections, ``&&``, ``;``, globs,
``$VAR``, backticks, subshells, ``VAR=value cmd``) does it run under the user's
``$SHELL -c``, and the plan says so, for the preview to show.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop.core.errors import UsageError

_OPERATORS = frozenset("|&;<>()")
_EXPANSIONS = frozenset("$`")
_GLOBS = frozenset("*?[")
_WORD_START_SPECIAL = frozenset("#~")
_ASSIGNMENT = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = re.compile(
    r"^(python[0-9.]*|pypy[0-9.]*|bash|sh|zsh|dash|fish|node|ruby|perl|Rscript|julia|"
    r"torchrun|accelerate|deepspeed|uv|uvx|poetry|pipenv|conda|mamba|micromamba|pixi|"
    r"mpirun|mpiexec|srun|nohup|env|time|nice|ionice|stdbuf|exec|xargs)$"
)
_SUBCOMMANDS = frozenset({"run", "launch", "exec"})
_SETUP = frozenset({"cd", "source", ".", "export", "set", "ulimit", "module", "umask"})
_SCRIPT_SUFFIXES = (".py", ".sh", ".jl", ".R", ".r", ".js", ".rb", ".pl", ".lua")
NAME_MAX = 60


@dataclass(frozen=True)
class CommandPlan:
    """How a command will run. ``display`` is for the preview: ``python train.py``, or
    ``/bin/bash -c 'a | b'`` when it needs a shell."""

    argv: tuple[str, ...]
    uses_shell: bool
    display: str
    text: str = ""
    """The command as the user would type it again: kept in the history, shown in tables."""


def plan_command(
    command: str | Sequence[str], environ: Mapping[str, str] = os.environ
) -> CommandPlan:
    """Split a typed command (``str``) or take an argv (``Sequence``, from ``gputop run --``).

    An argv runs as it is, never under a shell, except a single argument that is itself a
    command line (``gputop run --gpus 0 -- "python a.py | tee log"``): that is planned like
    typed text. Raises UsageError for an empty command or a bad quote.
    """
    if isinstance(command, str):
        return _plan_text(command, environ)
    argv = list(command)
    if not argv or not argv[0].strip():
        raise UsageError("The command is empty: give the program to run and its arguments.")
    if len(argv) == 1 and _is_command_line(argv[0]):
        return _plan_text(argv[0], environ)
    return CommandPlan(tuple(argv), False, shlex.join(argv), shlex.join(argv))


def needs_shell(text: str) -> bool:
    """True when a POSIX shell would do more with ``text`` than split it into words."""
    if _ASSIGNMENT.match(text):
        return True
    quote: str | None = None
    word_start = True
    position = 0
    while position < len(text):
        char = text[position]
        if quote == "'":
            quote = None if char == "'" else quote
        elif quote == '"':
            if char == "\\":
                position += 1
            elif char == '"':
                quote = None
            elif char in _EXPANSIONS:
                return True
        elif char == "\\":
            position += 1
            word_start = False
        elif char in "'\"":
            quote = char
            word_start = False
        elif char in " \t":
            word_start = True
        elif _special_unquoted(char, word_start):
            return True
        else:
            word_start = False
        position += 1
    return False


def _special_unquoted(char: str, word_start: bool) -> bool:
    if char == "\n" or char in _OPERATORS or char in _EXPANSIONS or char in _GLOBS:
        return True
    return word_start and char in _WORD_START_SPECIAL


def default_name(plan: CommandPlan) -> str:
    """The job's name when none is given: the script or program (``train.py``)."""
    words = _first_command_words(plan.text) if plan.uses_shell else list(plan.argv)
    name = _script_of(words) or os.path.basename(plan.argv[0]) or plan.argv[0]
    return " ".join(name.split())[:NAME_MAX]


def _is_command_line(argument: str) -> bool:
    """One quoted argument holding a whole command, not one program path with a space."""
    if needs_shell(argument):
        return True
    return any(c.isspace() for c in argument.strip()) and not os.path.exists(argument)


def _plan_text(text: str, environ: Mapping[str, str]) -> CommandPlan:
    stripped = text.strip()
    if not stripped:
        raise UsageError("The command is empty: give the program to run and its arguments.")
    try:
        words = shlex.split(stripped)
    except ValueError as error:
        problem = str(error).lower()
        raise UsageError(
            f"Cannot read the command {stripped!r}: {problem} (check its quotes)."
        ) from None
    if needs_shell(stripped):
        shell = environ.get("SHELL") or "/bin/sh"
        return CommandPlan(
            (shell, "-c", stripped), True, f"{shell} -c {shlex.quote(stripped)}", stripped
        )
    if not words or not words[0]:
        raise UsageError("The command is empty: give the program to run and its arguments.")
    return CommandPlan(tuple(words), False, shlex.join(words), stripped)


def _first_command_words(text: str) -> list[str]:
    """The words of the first real command of a shell line (after ``cd dir &&`` and such)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    segment: list[str] = []
    try:
        for token in lexer:
            if token and all(c in "();<>|&" for c in token):
                if segment and segment[0] not in _SETUP:
                    return segment
                segment = []
            else:
                segment.append(token)
    except ValueError:
        pass
    return segment


def _first_script(words: Sequence[str]) -> str | None:
    for word in words:
        if word == "-m" or word == "-c":
            return None
        if word.endswith(_SCRIPT_SUFFIXES) and not word.startswith("-"):
            return os.path.basename(word)
    return None


def _script_of(words: Sequence[str]) -> str | None:
    """Skip assignments, interpreters and wrappers and their options; keep the script."""
    wrapper: str | None = None
    take_next = False
    for position, word in enumerate(words):
        if take_next:
            return word
        base = os.path.basename(word)
        if _ASSIGNMENT.match(word) and wrapper is None:
            continue
        if _WRAPPERS.match(base):
            wrapper = base
            continue
        if wrapper is not None:
            script = _first_script(words[position:])
            if script is not None:
                return script
            if word == "-m":
                take_next = True
                continue
            if word == "-c":
                return f"{wrapper} -c"
            if word.startswith("-") or word.isdigit() or word in _SUBCOMMANDS:
                continue
        return base or word
    return wrapper
