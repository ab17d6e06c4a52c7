"""The one redactor of command lines, for every place other people read one.

Where gputop writes a command line for someone other than its owner (the exporter's labels,
a shared history store and its reports, the lab agent), it passes ``redact_argv`` (an argv)
or ``redact_text`` (a line already joined) first. It is an allow-list: what may be shown is
decided, every other word becomes ``***``, and what looks allowed is still checked for
secrets (docs/security.md, "Secrets in command lines", lists the rules and each place).
Redacting twice gives the same text as once, and redacting never fails.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Literal

from gputop.core.records import mutable

REDACTED = "***"
CommandForm = Literal["redacted", "name", "none"]
"""How a command line is written for others (``--command-label``): its secrets taken out,
its program's name only, or nothing."""
COMMAND_FORMS: tuple[CommandForm, ...] = ("redacted", "name", "none")

MAX_NAME_CHARS = 256

# Names that say their value is a secret ------------------------------------------------
_SECRET_ENDINGS = (
    "token",
    "key",
    "secret",
    "secrets",
    "credential",
    "credentials",
    "creds",
    "pass",
    "pwd",
    "cookie",
    "cookies",
)
_SECRET_PARTS = ("secret", "passw", "passphrase", "credential", "authoriz", "cookie")
_SECRET_WORDS = frozenset(
    {"pw", "passin", "passout", "session", "sessionid", "sig", "signature", "bearer", "jwt"}
)
_NOT_AUTH = frozenset({"author", "authors", "authored", "authoring"})
_NAME_PARTS = re.compile(r"[^A-Za-z0-9]+")

# What may be shown ------------------------------------------------------------------------
_PROGRAM = re.compile(r"-?[\w./~+*-]+:?")
_PATH_CHARS = re.compile(r"[\w./~,*%-]+")  # no "+": base64 holds "+" and "/"
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}\Z")
_NUMBER = re.compile(
    r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:[kKmMgGtTpP]i?[bB]?|%|ms|s|h)?"
)
_NUMBERS = re.compile(r"\d+(?:[,x]\d+)+")  # 0,1,2,3 and 224x224; not 1:2 (user:pw)
MAX_NUMBER_CHARS = 24
_LITERALS = frozenset({"true", "false", "none", "null", "yes", "no", "on", "off", "auto"})
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]{0,31}://)(.*)", re.DOTALL)
_URL_PLACE = re.compile(r"[\w.~/:,%*\[\]\-]*")
_LONG_OPTION = re.compile(r"--([A-Za-z0-9][\w.\-]*)(.*)", re.DOTALL)
_SHORT_OPTION = re.compile(r"-[A-Za-z][A-Za-z0-9]?")
_SHORT_WITH_VALUE = re.compile(r"-([A-Za-z][\w.\-]+)=(.*)", re.DOTALL)
_ASSIGNMENT = re.compile(r"([+~]*)([A-Za-z_][\w.\-]*)=(.*)", re.DOTALL)
_HEADER = re.compile(r"([A-Za-z][\w\-]*):")
_PYTHON = re.compile(r"(?:[\w.~+-]*/)*python[\d.]*")
_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
"""What follows ``python -m``: a module's dotted name (``vllm.entrypoints.openai.api_server``),
shown as the program it is."""
_SHELL_OPTION = re.compile(r"-[a-z]*c")
"""``-c``, ``-lc``, ``-ec``: the next argument is a shell (or python) command."""
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")"})
_SCHEMES = frozenset({"bearer", "basic", "token", "digest"})
"""Words of an ``Authorization:`` value that come before the secret itself."""

# Secrets that look allowed ---------------------------------------------------------------
_PREFIXES = (
    r"hf_|gh[pousr]_|github_pat_|glpat-|sk_live_|sk_test_|rk_live_|rk_test_|sk-"
    r"|xox[a-z]-|npm_|pypi-|ya29\."
)
# The prefix (group 1, 2, 3 or 4) is kept. Not after a letter or digit (so "mask-rcnn-…"
# keeps its "sk-"): checked on what precedes a match, which keeps the pattern a plain scan.
_TOKENS = re.compile(
    rf"({_PREFIXES})[A-Za-z0-9_\-]{{8,}}"
    r"|(AKIA|ASIA)[A-Z0-9]{16}"
    r"|(AIza)[A-Za-z0-9_\-]{20,}"
    r"|(eyJ)[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}(?:\.[A-Za-z0-9_\-]*)?"
)
_MASKED_TOKEN = re.compile(rf"(?:{_PREFIXES}|AKIA|ASIA|AIza|eyJ)?\*\*\*")
_RUN = re.compile(r"[A-Za-z0-9]{12,}")
_SPACES = re.compile(r"(\s+)")
_QUOTES = "\"'`"


def secret_name(name: str) -> bool:
    """Whether an option, variable or header called ``name`` holds a secret by its name
    (one longer than any real name is taken as one: hiding its value costs nothing)."""
    if len(name) > MAX_NAME_CHARS:
        return True
    for part in _NAME_PARTS.split(name.lower()):
        if not part:
            continue
        if part in _SECRET_WORDS or part.endswith(_SECRET_ENDINGS):
            return True
        if any(word in part for word in _SECRET_PARTS):
            return True
        if (part.startswith("auth") and part not in _NOT_AUTH) or part.endswith("auth"):
            return True
    return False


def _random(run: str) -> bool:
    """Whether a run of 12 or more letters and digits reads as a generated key: capitals,
    small letters and digits mixed (``Zp9UtkK7MDENGb``), one case with many digits, a long
    hash, or capitals and small letters about as often as each other and switching often
    (``wJalrXUtnFEMI``; a CamelCase word has a capital in five letters or more, an acronym
    switches seldom: ``HTTPServerConfig``)."""
    digits = sum(c.isdigit() for c in run)
    upper = sum(c.isupper() for c in run)
    letters = len(run) - digits
    lower = letters - upper
    if not letters:
        return False
    if len(run) >= 32:
        return digits > 0
    if len(run) >= 16 and digits and ((upper and lower) or digits >= 4):
        return True
    if upper < 4 or not lower or not 0.3 <= upper / letters <= 0.75:
        return False
    switches = sum(a.isupper() != b.isupper() for a, b in itertools.pairwise(run))
    return switches * 4 >= len(run)


def _shapes(text: str) -> str:
    """``text``, a piece that may be shown, with known tokens in it taken out (their prefix
    kept); the mark alone where a run in it reads as a generated key (a base64 secret holds
    "/": its other pieces would show)."""
    text = _TOKENS.sub(lambda m: _token(m, text), text)
    if any(_random(run.group()) for run in _RUN.finditer(text)):
        return REDACTED
    return text


def _token(match: re.Match[str], text: str) -> str:
    start = match.start()
    if start > 0 and text[start - 1].isascii() and text[start - 1].isalnum():
        return match.group()  # "mask-rcnn-…"
    prefix = next(group for group in match.groups() if group is not None)
    return prefix + REDACTED


def _path_like(word: str) -> bool:
    if _PATH_CHARS.fullmatch(word) is None:
        return False
    return "/" in word or word[0] in ".~" or _EXTENSION.search(word) is not None


def _number(word: str) -> bool:
    if len(word) > MAX_NUMBER_CHARS * 4:
        return False
    if _NUMBERS.fullmatch(word) is not None:
        return True
    return len(word) <= MAX_NUMBER_CHARS and _NUMBER.fullmatch(word) is not None


def _url(scheme: str, rest: str) -> str:
    """A URL without its user-info (a password may hold ``/`` or ``@``: all up to the last
    ``@`` goes), its query and its fragment."""
    at = rest.rfind("@")
    userinfo = ""
    if at >= 0:
        userinfo, rest = REDACTED + "@", rest[at + 1 :]
    tail = ""
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=-1)
    if cut >= 0:
        tail, rest = rest[cut] + (REDACTED if rest[cut + 1 :] else ""), rest[:cut]
    place = _shapes(rest) if _URL_PLACE.fullmatch(rest) is not None else REDACTED
    return scheme + userinfo + place + tail


def _value(word: str) -> str:
    """A word that is not an option: shown if allowed, else the mark."""
    if not word or _MASKED_TOKEN.fullmatch(word) is not None:
        return word
    if _number(word) or word.lower() in _LITERALS:
        return word
    url = _URL.fullmatch(word)
    if url is not None:
        return _url(url.group(1), url.group(2))
    if _path_like(word):
        return _shapes(word)
    token = _TOKENS.match(word)
    if token is not None and token.end() == len(word):
        return _token(token, word)
    return REDACTED


@mutable
class _State:
    program: bool = True
    """The next word is a program (the first, or the first of a shell command)."""
    secret: bool = False
    """The next word is the value of an option or header named as a secret."""
    shell: bool = False
    """The word before was ``-c``: a next argument that holds blanks is a shell command."""
    first: bool = True
    """The next word is the command line's first."""
    python: bool = False
    """The program is a Python interpreter: its ``-m`` names a module."""
    module: bool = False
    """The word before was Python's ``-m``: the next word is the module it runs."""


def _secret_value(value: str, state: _State) -> str:
    if not value:
        state.secret = True  # "--api-key= V": V is the value
        return value
    return REDACTED if value != REDACTED else value


def _option(word: str, state: _State) -> str | None:
    """An option word as shown, or ``None`` when ``word`` is not one."""
    if word in ("-", "--"):
        return word
    long = _LONG_OPTION.fullmatch(word)
    if long is not None:
        name, rest = long.group(1), long.group(2)
        if _shapes(name) != name:  # a key given as an option's name
            return REDACTED
        shown = "--" + name
        if not rest:
            state.secret = secret_name(name)
            return shown
        if rest[0] not in "=:":
            return shown + REDACTED
        value = rest[1:]
        header = _HEADER.fullmatch(value)
        if header is not None and secret_name(header.group(1)):  # --header=Authorization:
            state.secret = True
            return shown + rest
        if secret_name(name):
            return shown + rest[0] + _secret_value(value, state)
        return shown + rest[0] + _value(value)
    if word.startswith("--"):
        return REDACTED
    if not word.startswith("-") or len(word) < 2:
        return None
    if _SHORT_OPTION.fullmatch(word) is not None:
        state.shell = _SHELL_OPTION.fullmatch(word) is not None
        state.module = state.python and word == "-m"
        return word
    with_value = _SHORT_WITH_VALUE.fullmatch(word)
    if with_value is not None:  # -Dkey=V, -config=V
        name, value = with_value.group(1), with_value.group(2)
        if _shapes(name) != name:
            return REDACTED
        if secret_name(name):
            return f"-{name}={_secret_value(value, state)}"
        return f"-{name}={_value(value)}"
    if word[1].isalpha():
        # "-pSECRET", "-HAuthorization:Bearer", "-passin": the first letter only
        state.secret = secret_name(word[1:])
        state.shell = _SHELL_OPTION.fullmatch(word) is not None
        return word[:2] + REDACTED
    return REDACTED


def _judged(word: str, state: _State) -> str:
    """One unquoted word as shown; ``state`` moves on past it."""
    first, state.first = state.first, False
    state.shell = False
    if word in _SEPARATORS:
        state.program, state.secret = True, False
        return word
    if word.endswith(";"):  # "cmd --flag V; next"
        core = word.rstrip(";")
        shown = _judged(core, state) if core else ""
        state.program, state.secret, state.shell = True, False, False
        return shown + word[len(core) :]
    if state.secret:
        if not word.startswith("--"):
            state.secret = word.lower() in _SCHEMES  # "Authorization: Bearer V": V too
            state.program = False
            return word if state.secret or word == REDACTED else REDACTED
        state.secret = False
    program, state.program = state.program, False
    module, state.module = state.module, False
    if module and _MODULE.fullmatch(word):
        return _shapes(word)  # "python -m torch.distributed.run": the program it runs
    assignment = _ASSIGNMENT.fullmatch(word)
    if assignment is not None:  # NAME=V, +hydra.key=V; "A=B cmd" in a shell
        marks, name, value = assignment.groups()
        if _shapes(name) != name:
            return REDACTED  # a key given as the name
        if secret_name(name):
            state.program = program
            return f"{marks}{name}={_secret_value(value, state)}"
        if not value or value[0] == "=":
            return REDACTED  # base64's padding: "c2VjcmV0=", "c2VjcmV0dg=="
        state.program = program
        return f"{marks}{name}={_value(value)}"
    if program and (first or not word.startswith("-")) and _PROGRAM.fullmatch(word):
        state.python = _PYTHON.fullmatch(word) is not None
        return _shapes(word)  # "python3", "/usr/bin/env", a login shell's "-bash"
    return _option_or_value(word, state)


def _option_or_value(word: str, state: _State) -> str:
    shown = _option(word, state)
    if shown is not None:
        return shown
    header = _HEADER.fullmatch(word)
    if header is not None:  # "Authorization:", "Cookie:"
        state.secret = secret_name(header.group(1))
        return word
    return _value(word)


def _word(text: str, state: _State) -> str:
    """One word as shown. Quotes around it (a shell command in one argument) are kept and
    looked past."""
    word = text.strip(_QUOTES)
    if not word:
        return text
    start = text.index(word)
    return text[:start] + _judged(word, state) + text[start + len(word) :]


def _words(text: str, state: _State) -> str:
    """``text`` word by word (the blanks between kept)."""
    pieces = _SPACES.split(text)
    header_value = False
    for position in range(0, len(pieces), 2):  # even positions are words, odd are blanks
        word = pieces[position]
        if not word:
            continue
        if header_value and not state.secret:  # "Authorization: Bearer V W": V and W
            pieces[position] = REDACTED
            continue
        pieces[position] = _word(word, state)
        if state.secret and _HEADER.fullmatch(word.strip(_QUOTES)) is not None:
            header_value = True  # a secret header's value runs to the argument's end
    return "".join(pieces)


def redact_text(text: str) -> str:
    """A command line as one string (words separated by blanks), as others may see it."""
    state = _State()
    pieces = _SPACES.split(text)
    for position in range(0, len(pieces), 2):
        if pieces[position]:
            pieces[position] = _word(pieces[position], state)
            if state.shell:  # "bash -c cmd …", joined: cmd is a program
                state.program, state.shell = True, False
    return "".join(pieces)


def redacted_args(argv: Iterable[str]) -> Iterator[str]:
    """Each argument of an argv as others may see it, in turn: what one shows depends only
    on those before it, so a caller may stop early (a label cut to a length)."""
    state = _State()
    for arg in argv:
        if _SPACES.search(arg):
            if state.secret:
                # "--password 'correct horse a/b'": the whole argument is the value
                state.secret = state.program = state.shell = state.first = False
                yield REDACTED
                continue
            if state.shell:  # "bash -c 'sshpass -p V ssh host'"
                state.program = True
            yield _words(arg, state)
        else:
            yield _word(arg, state)


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """An argv as others may see it, argument by argument (see the module's text)."""
    return tuple(redacted_args(argv))


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


# A command kept or sent: a bound ------------------------------------------------------
# Any user can start a process whose command line is 2 MB (Linux takes 128 KiB an
# argument): sent whole by the lab agent every second, two of them made the lab drop the
# host as a flood; kept whole by the history recorder, each distinct one was 2 MB of the
# store for ever (its strings are never rolled up). The agent and the recorder keep at most
# MAX_COMMAND_CHARS of one, its arguments joined by spaces, the last one ending in an
# ellipsis; redacted, each argument whole up to MAX_ARG_CHARS before the cut (as the
# exporter's labels).

MAX_COMMAND_CHARS = 4096
MAX_ARGS = 256
MAX_ARG_CHARS = 4096
"""What the lab reads of a host's command (gputop/core/remote/protocol.py); each argument
is redacted whole up to this, so a token at the cut never shows its first characters."""
ELLIPSIS = "…"


def is_short(command: tuple[str, ...]) -> bool:
    """Whether ``command`` is within the bound as it is (every ordinary one). Redacted, it
    may not be (a word of one character becomes ``***``): cut_command what the redactor
    gives."""
    return len(command) <= MAX_ARGS and sum(map(len, command)) < MAX_COMMAND_CHARS - MAX_ARGS


def first_args(command: tuple[str, ...]) -> tuple[str, ...]:
    """The arguments that can show within the bound, each at most ``MAX_ARG_CHARS``."""
    kept: list[str] = []
    length = 0
    for arg in command[:MAX_ARGS]:
        if length > MAX_COMMAND_CHARS:
            break
        kept.append(arg[:MAX_ARG_CHARS])
        length += len(kept[-1]) + 1
    return tuple(kept)


def cut_command(command: tuple[str, ...]) -> tuple[str, ...]:
    """``command`` ending where its text reaches ``MAX_COMMAND_CHARS``."""
    kept: list[str] = []
    room = MAX_COMMAND_CHARS
    for arg in command:
        if len(arg) > room:
            if room > len(ELLIPSIS):
                kept.append(arg[: room - len(ELLIPSIS)] + ELLIPSIS)
            else:  # the arguments before filled it: the last of them ends it
                kept[-1] = kept[-1][: -len(ELLIPSIS)] + ELLIPSIS
            return tuple(kept)
        kept.append(arg)
        room -= len(arg) + 1
    return command


def bounded_argv(command: tuple[str, ...]) -> tuple[str, ...]:
    """``command`` within the bound, as it is (not redacted); itself where it is short."""
    return command if is_short(command) else cut_command(first_args(command))


def bounded_for_others(command: tuple[str, ...], form: CommandForm) -> tuple[str, ...]:
    """``command`` as ``form`` writes it for others, within the bound: each argument
    redacted whole up to ``MAX_ARG_CHARS``, the whole cut after."""
    return cut_command(argv_for_others(command if is_short(command) else first_args(command), form))


READ_COMMAND_CHARS = MAX_COMMAND_CHARS + MAX_ARG_CHARS
"""What is read of a command kept as one string (the history store's): a store written
before the bound holds 2 MB ones. Enough that what is shown of it is redacted as the
recorder redacts, each word whole up to ``MAX_ARG_CHARS``."""


def kept_text(text: object, form: CommandForm | None) -> str | None:
    """A command kept as one string, read back (its first ``READ_COMMAND_CHARS`` + 1
    characters: more says it was longer), as a reader shows it: redacted as ``form`` writes
    it for others (``None``: whole), at most ``MAX_COMMAND_CHARS``, ending in an ellipsis
    where cut; ``None`` where it is no text (a row changed by hand)."""
    if not isinstance(text, str):
        return None
    cut = len(text) > READ_COMMAND_CHARS
    text = text[:READ_COMMAND_CHARS]
    if form is not None:
        if cut:  # the word the read ended in is left out: no word's start alone is redacted
            space = text.rfind(" ")
            text = text[:space] if space > 0 else text
        shown = text_for_others(text, form)
        if shown is None or form == "name":
            return None if shown is None else shown[:MAX_COMMAND_CHARS]
        text = shown
    if cut or len(text) > MAX_COMMAND_CHARS:
        return text[: MAX_COMMAND_CHARS - len(ELLIPSIS)] + ELLIPSIS
    return text
