"""From what a person typed to the argv gputop executes, and a short name for the job.

Split as a POSIX shell would and executed directly, so nothing is interpreted twice; only
text that needs a shell runs under ``$SHELL -c``. A command that, taken whole, names an
existing file runs that file: never a shell by accident (docs/security.md).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence

from gputop.core.errors import UsageError
from gputop.core.records import frozen

_EXPANSIONS = frozenset("$`")
_SPECIAL = frozenset("|&;<>()\n*?[") | _EXPANSIONS
"""What a shell does more with than split words: operators, a newline, globs, expansions."""
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


@frozen(slots=False)
class CommandPlan:
    """How a command will run; ``display`` for the preview (``/bin/bash -c 'a | b'``), ``text``
    as the user would type it again (history, tables), ``note`` why it runs so."""

    argv: tuple[str, ...]
    uses_shell: bool
    display: str
    text: str = ""
    note: str | None = None


def plan_command(
    command: str | Sequence[str],
    environ: Mapping[str, str] = os.environ,
    cwd: str | None = None,
    look_for_file: bool = True,
) -> CommandPlan:
    """Split a typed command or take an argv (``gputop run --``), which runs as it is unless
    it is one argument holding a command line. A command naming an existing file in ``cwd``
    (default: here; ``look_for_file=False``: another machine's) runs that file. UsageError
    for an empty command or a bad quote."""
    if not look_for_file:
        cwd = _NOWHERE
    if isinstance(command, str):
        return _plan_text(command, environ, cwd)
    argv = list(command)
    if not argv or not argv[0].strip():
        raise UsageError("The command is empty: give the program to run and its arguments.")
    if len(argv) == 1 and _is_command_line(argv[0]):
        return _plan_text(argv[0], environ, cwd)
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
        elif char in _SPECIAL or (word_start and char in _WORD_START_SPECIAL):
            return True
        else:
            word_start = False
        position += 1
    return False


def default_name(plan: CommandPlan) -> str:
    """The job's name when none is given: the script or program (``train.py``)."""
    words = _first_command_words(plan.text) if plan.uses_shell else list(plan.argv)
    name = _script_of(words) or os.path.basename(plan.argv[0]) or plan.argv[0]
    return " ".join(name.split())[:NAME_MAX]


def _is_command_line(argument: str) -> bool:
    """One quoted argument that may hold a whole command (a space or shell syntax)."""
    return needs_shell(argument) or any(c.isspace() for c in argument.strip())


_NOWHERE = "\0"
"""A ``cwd`` in which no file is looked for."""


def _existing_file(text: str, cwd: str | None) -> str | None:
    """``text`` as a path to run where it exists in ``cwd``; a bare name gets ``./`` (execvp
    would search ``PATH`` for it)."""
    # lexists is False for a NUL or a name too long for the file system, never an error
    if not text or cwd == _NOWHERE or not os.path.lexists(os.path.join(cwd or os.curdir, text)):
        return None
    return text if os.sep in text else os.curdir + os.sep + text


def _file_plan(text: str, path: str) -> CommandPlan:
    shown = shlex.join([path])
    note = (
        f"{shown} names a file that exists: gputop runs that file, with no arguments, "
        "never a shell (to run a command line, rename or move the file)."
    )
    return CommandPlan((path,), False, shown, shlex.join([text]), note)


def _plan_text(text: str, environ: Mapping[str, str], cwd: str | None = None) -> CommandPlan:
    stripped = text.strip()
    if not stripped:
        raise UsageError("The command is empty: give the program to run and its arguments.")
    if needs_shell(text) or any(c.isspace() or c in "'\"\\" for c in text):
        for name in dict.fromkeys((text, stripped)):  # as given, then without its spaces
            path = _existing_file(name, cwd)
            if path is not None:  # a file's name, not a command line: never a shell
                return _file_plan(name, path)
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
    for position, word in enumerate(words):
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
            if word == "-m":  # the module's name
                return words[position + 1] if position + 1 < len(words) else wrapper
            if word == "-c":
                return f"{wrapper} -c"
            if word.startswith("-") or word.isdigit() or word in _SUBCOMMANDS:
                continue
        return base or word
    return wrapper


def missing_program(
    argv: Sequence[str], uses_shell: bool, cwd: str, environ: Mapping[str, str]
) -> str | None:
    """A hint now for the most common failure later: a program that is not there (not for a
    shell's command: the shell's to find)."""
    if uses_shell or not argv:
        return None
    program = argv[0]
    if os.sep in program:
        found = os.path.exists(program if os.path.isabs(program) else os.path.join(cwd, program))
    else:
        found = shutil.which(program, path=environ.get("PATH")) is not None
    if found:
        return None
    return f"{program} was not found; the job will fail with exit code 127 (command not found)."
