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
        (["bash", "-c", "run --token abc; x"], ["bash", "-c", "run --token ***; x"]),
        (["bash", "-c", "run '--token=abc' x"], ["bash", "-c", "run '--token=***' ***"]),
        (["bash", "-c", "run --token", "abc"], ["bash", "-c", "run --token", "***"]),
        (["x", "--pass", "correct horse a/b"], ["x", "--pass", "***"]),  # the value whole
        (
            ["curl", "-H", "Authorization: Bearer a/b c/d"],
            ["curl", "-H", "Authorization: Bearer *** ***"],
        ),
        (["curl", "-H", "Cookie: a=b; c=d/e"], ["curl", "-H", "Cookie: ***; ***"]),
        (["--token", "--verbose"], ["--token", "--verbose"]),  # an option, not its value
        (["--token"], ["--token"]),
        (["--token="], ["--token="]),
        (["x\nhf_abcdefghijkl"], ["x\nhf_***"]),
    ],
)
def test_each_form_of_secret_is_taken_out(argv: list[str], expected: list[str]) -> None:
    assert redact_argv(argv) == tuple(expected)


# The forms issue 40 found reaching /metrics: (argv, the secret, what shows instead).
ISSUE_FORMS = [
    (["curl", "-u", "admin:PASSq7", "https://h/x"], "PASSq7", "curl -u *** https://h/x"),
    (["curl", "-u", "1000:90417"], "90417", "curl -u ***"),  # digits on both sides too
    (["gpg", "--passphrase", "PASSq7", "f.gpg"], "PASSq7", "gpg --passphrase *** f.gpg"),
    (["x", "--pass", "PASS/q7"], "PASS/q7", "x --pass ***"),
    (["x", "--pw", "12345678"], "12345678", "x --pw ***"),
    (["mysql", "-pPASSq7", "-h", "db"], "PASSq7", "mysql -p*** -h ***"),
    (["env", "MYSQL_PWD=PASS/q7", "mysql"], "PASS/q7", "env MYSQL_PWD=*** ***"),
    (["openssl", "-passin", "pass:PASSq7"], "PASSq7", "openssl -p*** ***"),
    (
        ["bash", "-c", "sshpass -p PASSq7 ssh host && ls /tmp"],
        "PASSq7",
        "bash -c sshpass -p *** *** *** && ls /tmp",
    ),
    (["curl", "https://h/p?token=TOKq7&sig=SIGq7"], "q7", "curl https://h/p?***"),
    (["git", "clone", "https://al:PA/SSq7@h/r.git"], "SSq7", "git *** https://***@h/r.git"),
    (["git", "clone", "https://al:PA@SSq7@h/r.git"], "SSq7", "git *** https://***@h/r.git"),
    (["curl", "-HAuthorization:Bearer", "TOK/q7"], "q7", "curl -H*** ***"),
    (["curl", "-H", "Authorization: Bearer TOKq7"], "TOKq7", "curl -H Authorization: Bearer ***"),
    (["curl", "-H", "Cookie: session=SESq7"], "SESq7", "curl -H Cookie: ***"),
    (["curl", "--cookie", "session=SES/q7"], "SES/q7", "curl --cookie ***"),
    (["x", "--password:PASSq7"], "PASSq7", "x --password:***"),
    (["x", "--api-key=", "KEY/q7"], "KEY/q7", "x --api-key= ***"),
    (["x", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"], "9tSrke72", "x AIza***"),
    (["x", "--k", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"], "4eC39", "x --k sk_live_***"),
    (
        ["x", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N"],
        "dozjg",
        "x eyJ***",
    ),
    (["x", "/data/sk_live_4eC39HqLyjWDarjtT1zdp7dc/a.pt"], "4eC39", "x /data/sk_live_***/a.pt"),
    (["x", "s3://b/Zq9xT4vLm2Pq8Rn6Wk3H/a.pt"], "Zq9xT4", "x s3://***"),
    # a base64 secret holds "/" (and "+"): it looked like a path, its pieces showed
    (
        ["aws", "configure", "set", "k", "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbKEY"],
        "2Zp9",
        "aws *** *** *** ***",
    ),
    (["x", "ab12+CD34/ef56"], "CD34", "x ***"),
    (["x", "c2VjcmV0dmFsdWU=", "c2VjcmV0dmFsdQ=="], "c2Vj", "x *** ***"),  # padded base64
]


@pytest.mark.parametrize(("argv", "secret", "shown"), ISSUE_FORMS)
def test_the_forms_that_reached_the_exporter_are_hidden(
    argv: list[str], secret: str, shown: str
) -> None:
    assert " ".join(redact_argv(argv)) == shown
    assert secret not in redact_text(" ".join(argv))
    assert secret not in command_label(tuple(argv))


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        # what an ML engineer needs to recognise a job: program, script, flags, numbers, paths
        (
            "python train.py --lr 0.1 --config cfg/a.yaml --epochs 10 -v",
            "python train.py --lr 0.1 --config cfg/a.yaml --epochs 10 -v",
        ),
        (
            "torchrun --nproc_per_node=8 train.py --batch-size 64 --wd 3e-4 --out ~/runs/x",
            "torchrun --nproc_per_node=8 train.py --batch-size 64 --wd 3e-4 --out ~/runs/x",
        ),
        (
            "python -m torch.distributed.run --fp16 true ./scripts/ft.sh",
            "python -m torch.distributed.run --fp16 true ./scripts/ft.sh",
        ),
        (
            "python train.py trainer.max_epochs=10 data.root=/data/in CUDA_VISIBLE_DEVICES=0,1",
            "python train.py trainer.max_epochs=10 data.root=/data/in CUDA_VISIBLE_DEVICES=0,1",
        ),
        ("/usr/bin/python3 -u serve.py --port 8000", "/usr/bin/python3 -u serve.py --port 8000"),
        ("-bash", "-bash"),
        # a word that is not a path, a number or a flag is hidden, whatever it is
        ("python x.py --model gpt2 --optim adam", "python x.py --model *** --optim ***"),
        ("pip install scikit-learn", "pip *** ***"),
        ("python -m mask-rcnn-resnet50-fpn-coco", "python -m ***"),
        # the module Python's -m runs is the program; another program's -m takes a value
        (
            "python -m vllm.entrypoints.openai.api_server --port 8000",
            "python -m vllm.entrypoints.openai.api_server --port 8000",
        ),
        (
            "/opt/venv/bin/python3.11 -u -m torch.distributed.run --nproc-per-node 8 train.py",
            "/opt/venv/bin/python3.11 -u -m torch.distributed.run --nproc-per-node 8 train.py",
        ),
        ("git commit -m hunter2", "git *** -m ***"),
        ("python -m sk_live_abcdefghijkl", "python -m sk_live_***"),
        ("ssh alice@host", "ssh ***"),
        ("git log --author alice", "git *** --author ***"),
        ("curl https://host/path?x=1", "curl https://host/path?***"),
        ("java -Xmx4g -jar app.jar", "java -X*** -j*** app.jar"),
        (
            "python /data/MyExperimentResults/ResNet50/ckpt-12000.pt src/HTTPServerConfig.java",
            "python /data/MyExperimentResults/ResNet50/ckpt-12000.pt src/HTTPServerConfig.java",
        ),
        (
            "python x.py --tokenizer gpt2 --max-tokens 512",
            "python x.py --tokenizer *** --max-tokens 512",
        ),
    ],
)
def test_what_is_shown_of_an_ordinary_command_line(argv: str, shown: str) -> None:
    assert " ".join(redact_argv(argv.split())) == shown
    assert redact_text(argv) == shown


def test_option_names_that_hold_a_secret() -> None:
    for name in (
        "hf-token",
        "HF_TOKEN",
        "apiKey",
        "db_passwd",
        "password",
        "auth",
        "oauth",
        "pass",
        "pw",
        "passphrase",
        "passin",
        "MYSQL_PWD",
        "Cookie",
        "session",
        "HAuthorization:Bearer",
    ):
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
    """An argv of ordinary words with one secret in one of the forms issue 40 lists, or as a
    bare word."""
    secret = draw(SECRET)
    form = draw(st.integers(0, 12))
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
    elif form == 6:
        held = [f"run {option} {secret} && done"]
    elif form == 7:
        held = [secret]  # a bare word: not a path, a number or a flag
    elif form == 8:
        held = ["-p" + secret]
    elif form == 9:
        held = ["-u", f"user:{secret}"]
    elif form == 10:
        held = [f"https://h/p?token={secret}&sig=x"]
    elif form == 11:
        held = ["-c", f"sshpass -p {secret} ssh host"]
    else:
        held = ["-HAuthorization:Bearer", secret]
    before = ["prog", *draw(st.lists(SAFE_WORD, max_size=4))]
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


HIDDEN_WORD = st.text(
    alphabet=string.ascii_letters + string.digits + ":@!$^#?<>[]{}|\\", min_size=6, max_size=30
).map(lambda s: "Zq9" + s + "!")


@settings(max_examples=300, deadline=None)
@given(st.lists(SAFE_WORD, max_size=4), HIDDEN_WORD, st.lists(SAFE_WORD, max_size=4))
def test_a_word_the_allow_list_does_not_know_never_survives(
    before: list[str], hidden: str, after: list[str]
) -> None:
    """Not a path (it holds punctuation), not a number, not a flag: whatever it is, it is
    hidden, alone, as an option's value or a variable's, in a shell command."""
    for argv in (
        ["prog", *before, hidden, *after],
        ["prog", *before, "--opt", hidden, *after],
        ["prog", f"--opt={hidden}", f"NAME={hidden}"],
        ["sh", "-c", f"prog {' '.join(before)} {hidden} {' '.join(after)}"],
    ):
        assert hidden not in " ".join(redact_argv(argv)), argv
        assert hidden not in redact_text(" ".join(argv)), argv


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

    holder = _Holder()
    row = holder.row(ReportBy.PROCESS, ("12", "alice", "python t.py --hf-token hf_SECRETVALUE1"))
    assert row.command == "python t.py --hf-token ***"
