"""The one redactor of command lines (gputop/core/redact.py, docs/security.md): each form it
takes out, what it keeps, and, for any input, that it never fails, that twice is once, and
that a token it knows never survives it."""

from __future__ import annotations

import string
import time
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputop.core.exporter.labels import MAX_LABEL_CHARS, command_label
from gputop.core.history.report import ReportBy
from gputop.core.redact import (
    REDACTED,
    argv_for_others,
    redact_argv,
    redact_text,
    secret_name,
    text_for_others,
)
from gputop.core.remote.agent import for_reader, shows_whole
from gputop.core.sampling.nvml_backend import NvmlBackend


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--hf-token=hf_abcdefghijkl"], ["--hf-token=***"]),
        (["--wandb-key", "v1"], ["--wandb-key", "***"]),
        (["-password", "v2"], ["-password", "***"]),
        (["-apiKey=v3"], ["-apiKey=***"]),
        (["--db-passwd=v4"], ["--db-passwd=***"]),
        (["--auth", "v5"], ["--auth", "***"]),
        (["--authorization=v5"], ["--authorization=***"]),
        (["--aws-credentials", "v6"], ["--aws-credentials", "***"]),
        (["--client_secret=v7"], ["--client_secret=***"]),
        (["--OAUTH", "v7"], ["--OAUTH", "***"]),
        (["HF_TOKEN=v8"], ["HF_TOKEN=***"]),
        (["wandb.api_key=v9"], ["wandb.api_key=***"]),
        (["+trainer.secret=v9"], ["+trainer.secret=***"]),
        (["https://alice:pw@host/x"], ["https://***@host/x"]),
        (["--url=postgres://u:pw@db:5432/x"], ["--url=postgres://***@db:5432/x"]),
        (["ghp_abcdefghijklmnop"], ["ghp_***"]),
        (["gho_abcdefghijklmnop"], ["gho_***"]),
        (["github_pat_11AAAAAAAAAA_bbbb"], ["github_pat_***"]),
        (["glpat-abcdefghijklmnop"], ["glpat-***"]),
        (["sk-proj-abcdefghijklmnop"], ["sk-***"]),
        (["xoxb-1234-abcdefgh"], ["xoxb-***"]),
        (["xoxp-1234-abcdefgh"], ["xoxp-***"]),
        (["AKIAIOSFODNN7EXAMPLE"], ["AKIA***"]),
        (["--header=Authorization: Bearer abc"], ["--header=Authorization: Bearer ***"]),
        (["-H", "Authorization: Bearer abc"], ["-H", "Authorization: Bearer ***"]),
        (["-c", "run --token abc; x"], ["-c", "run --token *** x"]),  # the word, whole
        (["-c", "run '--token=abc' x"], ["-c", "run '--token=***' x"]),
        (["-c", "run --token", "abc"], ["-c", "run --token", "***"]),
        (["--token", "--verbose"], ["--token", "--verbose"]),  # an option, not its value
        (["--token"], ["--token"]),
        (["--token="], ["--token="]),
        (["x\nhf_abcdefghijkl"], ["x\nhf_***"]),
    ],
)
def test_each_form_of_secret_is_taken_out(argv: list[str], expected: list[str]) -> None:
    assert redact_argv(argv) == tuple(expected)


@pytest.mark.parametrize(
    "argv",
    [
        ["python", "train.py", "--lr", "3e-4", "--epochs", "10"],
        ["python", "-m", "mask-rcnn-resnet50-fpn-coco"],  # "sk-" after a letter
        ["pip", "install", "scikit-learn", "sk-learn"],
        ["python", "x.py", "--tokenizer", "gpt2", "--max-tokens", "512"],
        ["git", "log", "--author", "alice"],
        ["curl", "https://host/path?x=1"],
        ["ssh", "alice@host"],
    ],
)
def test_ordinary_command_lines_are_kept(argv: list[str]) -> None:
    assert redact_argv(argv) == tuple(argv)


def test_option_names_that_hold_a_secret() -> None:
    for name in ("hf-token", "HF_TOKEN", "apiKey", "db_passwd", "password", "auth", "oauth"):
        assert secret_name(name), name
    for name in ("tokenizer", "max-tokens", "author", "lr", "keyboard"):
        assert not secret_name(name), name


def test_the_forms_for_others() -> None:
    argv = ("/usr/bin/python3", "t.py", "--token", "abc")
    assert argv_for_others(argv) == ("/usr/bin/python3", "t.py", "--token", "***")
    assert argv_for_others(argv, "name") == ("python3",)
    assert argv_for_others(argv, "none") == ()
    assert text_for_others("/usr/bin/python3 t.py --token abc") == (
        "/usr/bin/python3 t.py --token ***"
    )
    assert text_for_others("/usr/bin/python3 t.py --token abc", "name") == "python3"
    assert text_for_others("x", "none") is None
    assert text_for_others(None) is None


def test_a_label_redacts_before_it_cuts() -> None:
    """A token past the cut must not show its first characters."""
    padding = "x" * (MAX_LABEL_CHARS - 20)
    argv = ("python", padding, "hf_" + "A" * 40, "--token", "S" * 50)
    text = command_label(argv)
    assert "AAA" not in text and "SSS" not in text
    # the value of a secret option that is the last shown argument
    argv = ("python", "y" * (MAX_LABEL_CHARS - 12), "--token", "SECRETVALUE")
    assert "SECRET" not in command_label(argv)
    assert command_label(argv, mode="name") == "python"
    assert command_label(argv, mode="none") == ""


# Any input -----------------------------------------------------------------------------

WORDS = st.text(alphabet=string.ascii_letters + string.digits + "-_=.:/@'\" ", max_size=20)
ANY_ARGV = st.lists(st.one_of(st.text(max_size=40), WORDS), max_size=12)
SECRET = st.text(alphabet=string.ascii_letters + string.digits, min_size=8, max_size=30).map(
    lambda s: "Zq9" + s
)
SAFE_WORD = st.text(alphabet=string.ascii_lowercase + string.digits + "._/", max_size=12)
TOKEN_PREFIXES = ("hf_", "ghp_", "gho_", "github_pat_", "glpat-", "sk-", "xoxb-", "xoxp-")
SECRET_OPTIONS = ("--hf-token", "--api-key", "-password", "--db-passwd", "--auth", "--secret")


@st.composite
def marked(draw: st.DrawFn) -> tuple[list[str], str]:
    """An argv of ordinary words with one secret in one of the forms the redactor knows."""
    secret = draw(SECRET)
    form = draw(st.integers(0, 6))
    option = draw(st.sampled_from(SECRET_OPTIONS))
    if form == 0:
        held = [f"{option}={secret}"]
    elif form == 1:
        held = [option, secret]
    elif form == 2:
        held = [f"{option.lstrip('-').upper().replace('-', '_')}={secret}"]
    elif form == 3:
        held = [f"https://user:{secret}@example.org/x"]
    elif form == 4:
        held = [draw(st.sampled_from(TOKEN_PREFIXES)) + secret]
    elif form == 5:
        held = ["AKIA" + secret.upper()[:16].ljust(16, "Q")]
        secret = held[0][4:]
    else:
        held = [f"run {option} {secret} && done"]
    before = draw(st.lists(SAFE_WORD, max_size=4))
    after = draw(st.lists(SAFE_WORD.filter(lambda w: not w.startswith("-")), max_size=4))
    return [*before, *held, *after], secret


@settings(max_examples=300, deadline=None)
@given(ANY_ARGV)
def test_any_argv_is_redacted_without_failing_and_twice_is_once(argv: list[str]) -> None:
    once = redact_argv(argv)
    assert len(once) == len(argv)
    assert redact_argv(once) == once


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_redacted_without_failing_and_twice_is_once(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@settings(max_examples=300, deadline=None)
@given(marked())
def test_a_marked_secret_never_survives(case: tuple[list[str], str]) -> None:
    argv, secret = case
    assert secret not in " ".join(redact_argv(argv))
    assert secret not in redact_text(" ".join(argv))
    assert secret not in command_label(tuple(argv))
    assert REDACTED in " ".join(redact_argv(argv))


@pytest.mark.parametrize(
    "hostile",
    ["a" * 1_000_000, "a-" * 500_000, "--a" * 300_000, "://" * 300_000, "--token " * 100_000],
    ids=["letters", "dashed", "options", "url-marks", "secret-options"],
)
def test_a_huge_argument_takes_time_in_its_length_not_its_square(hostile: str) -> None:
    """A pattern that tried each position as the start of a URL took minutes on a megabyte
    (the square of its length); a linear pass takes well under a second. The bound is
    generous: it tells linear from quadratic, not fast from slow."""
    started = time.process_time()
    redact_argv(["x", hostile, "y"])
    redact_text(hostile)
    assert time.process_time() - started < 20.0


def test_the_agent_sends_its_users_commands_whole_and_everyone_elses_redacted(
    fake_backend: Callable[..., NvmlBackend],
) -> None:
    snapshot = fake_backend("demo").sample()
    argv = ("python", "t.py", "--hf-token", "SECRETVALUE")
    users = ["alice", "bob", None]
    gpu = snapshot.gpus[0]
    processes = tuple(
        replace(gpu.processes[0], pid=100 + n, user=user, command=argv)
        for n, user in enumerate(users)
    )
    snapshot = replace(snapshot, gpus=(replace(gpu, processes=processes), *snapshot.gpus[1:]))
    for reader, whole in (("alice", {"alice"}), ("root", set())):
        shown = for_reader(snapshot, reader)
        for process in shown.gpus[0].processes:
            expected = argv if process.user in whole else redact_argv(argv)
            assert process.command == expected, (reader, process.user)
    assert shows_whole("alice", "alice") and not shows_whole("root", "root")
    assert not shows_whole(None, "alice")


def test_a_report_from_prometheus_redacts_what_an_older_exporter_labelled() -> None:
    from gputop.core.history.prometheus_report import _Holder

    holder = _Holder(labels={})
    row = holder.row(ReportBy.PROCESS, ("12", "alice", "python t.py --hf-token hf_SECRETVALUE1"))
    assert row.command == "python t.py --hf-token ***"
