"""Secrets in command lines never leave their owner's view (docs/security.md, "Secrets in
command lines").

A corpus of real processes, each holding a secret in its command line in one of the forms
gputop/core/redact.py knows, runs on simulated cards (the scenario lists their pids; the
fake reads their user and command line from /proc as the driver's list would). Then:

- ``gputop exporter``'s ``/metrics``, as any local user reads it;
- a shared store (``record --readable-by all``): its files' bytes, and ``gputop report``
  from it as a second real user;
- the lab protocol: ``gputop agent``'s snapshots and its answer to a history request;

hold none of the secrets, and each process's command shows the redaction mark.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.other_user import OTHER_GID, OTHER_UID, gputop_as_other_user, require_root
from helpers.prometheus import running_exporter
from helpers.scenarios import minimal_gpu
from helpers.waiting import wait_for
from prometheus_client.parser import text_string_to_metric_families

from gputop.core.redact import REDACTED

WAIT_S = 60.0
SLEEP = "import time;time.sleep(600)"
WINDOW = ("--since", "2000-01-01", "--until", "2100-01-01")

# (extra arguments, the secrets among them): every form the redactor takes out
CORPUS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("--hf-token=hf_Q1w2E3r4T5y6U7i8O9p0Aa",), ("Q1w2E3r4T5y6U7i8O9p0Aa",)),
    (("--wandb-key", "wandbvalue2f9c"), ("wandbvalue2f9c",)),
    (("-password", "hunter2q7z"), ("hunter2q7z",)),
    (("-apiKey=keyvalue5d1e",), ("keyvalue5d1e",)),
    (("--db-passwd=pwvalue8c3a",), ("pwvalue8c3a",)),
    (("--auth", "authvalue4b6d"), ("authvalue4b6d",)),
    (("--aws-credentials", "credvalue7e2f"), ("credvalue7e2f",)),
    (("--client_secret=secretvalue1a9b",), ("secretvalue1a9b",)),
    (("HF_TOKEN=envvalue3c8d",), ("envvalue3c8d",)),
    (("wandb.api_key=hydravalue6f4a",), ("hydravalue6f4a",)),
    (("https://alice:urlpass9d2c@git.example.org/r.git",), ("urlpass9d2c", "alice:")),
    (("ghp_Z9y8X7w6V5u4T3s2R1q0Pp",), ("Z9y8X7w6V5u4T3s2R1q0Pp",)),
    (("github_pat_11ABCDEFG0123456789xyz",), ("11ABCDEFG0123456789xyz",)),
    (("glpat-Mn0Pq1Rs2Tu3Vw4Xy5",), ("Mn0Pq1Rs2Tu3Vw4Xy5",)),
    (("sk-proj-Aa1Bb2Cc3Dd4Ee5Ff6",), ("proj-Aa1Bb2Cc3Dd4Ee5Ff6",)),
    (("xoxb-1234567890-abcdefXYZ",), ("1234567890-abcdefXYZ",)),
    (("xoxp-2234567890-ghijklXYZ",), ("2234567890-ghijklXYZ",)),
    (("AKIAQWERTYUIOPASDFGH",), ("QWERTYUIOPASDFGH",)),
    (("-H", "Authorization: Bearer bearervalue0e5f"), ("bearervalue0e5f",)),
    # the forms issue 40 found reaching /metrics past a redactor that listed forms
    (("-u", "admin:userpass1c7e"), ("userpass1c7e",)),
    (("--passphrase", "phrase2d8f"), ("phrase2d8f",)),
    (("--pass", "pass3e9a/x"), ("pass3e9a",)),
    (("--pw", "40961234"), ("40961234",)),
    (("-ppw5f0b",), ("pw5f0b",)),
    (("MYSQL_PWD=mysql6a1c",), ("mysql6a1c",)),
    (("-passin", "pass:passin7b2d"), ("passin7b2d",)),
    (("-c", "sshpass -p sshpass8c3e ssh host"), ("sshpass8c3e",)),
    (("https://h.example/p?token=tok9d4f&sig=sig0e5a",), ("tok9d4f", "sig0e5a")),
    (("https://bob:pa/ss1f6b@h.example/r.git",), ("ss1f6b", "bob:")),
    (("https://bob:pa@ss2a7c@h.example/r.git",), ("ss2a7c",)),
    (("-HAuthorization:Bearer", "hdr3b8d"), ("hdr3b8d",)),
    (("-H", "Cookie: session=cookie4c9e"), ("cookie4c9e",)),
    (("--password:colon5d0f",), ("colon5d0f",)),
    (("--api-key=", "spaced6e1a"), ("spaced6e1a",)),
    (("AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",), ("9tSrke72PouQMnMX",)),
    (("sk_live_4eC39HqLyjWDarjtT1zdp7dc",), ("4eC39HqLyjWDarjtT1zdp7dc",)),
    (
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N",),
        ("eyJzdWIiOiIxMjM0In0", "dozjgNryP4J3jVmNHl0w5N"),
    ),
)
SECRETS = tuple(secret for _, secrets in CORPUS for secret in secrets)


@dataclass(frozen=True)
class Corpus:
    scenario: str
    pids: tuple[int, ...]
    directory: Path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    """The corpus's processes, running, and a scenario that puts them on two cards."""
    from gputop.core.sampling.pid_namespace import detect_pid_namespace

    if detect_pid_namespace().nested:
        pytest.skip("a nested PID namespace: the fake cannot list this test's own pids")
    directory = tmp_path_factory.mktemp("secrets")
    started = [
        subprocess.Popen(
            [sys.executable, "-c", SLEEP, *args],
            stdin=subprocess.DEVNULL,
            cwd=directory,
        )
        for args, _ in CORPUS
    ]
    try:
        for process, (_args, secrets) in zip(started, CORPUS, strict=True):
            # Popen returns once forked; until the child's exec, /proc shows pytest's argv
            deadline = time.monotonic() + 30
            while True:
                argv = Path(f"/proc/{process.pid}/cmdline").read_bytes().decode()
                if all(secret in argv for secret in secrets) or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            assert all(secret in argv for secret in secrets)  # the corpus is what it says
        gpus = [
            minimal_gpu(
                uuid=f"GPU-11111111-aaaa-bbbb-cccc-00000000000{card}",
                pci_bus_id=f"00000000:0{7 + card}:00.0",
                processes=[
                    {"pid": p.pid, "used_memory_mib": 100 + n, "type": "C", "sm_util": 10}
                    for n, p in enumerate(started)
                    if n % 2 == card
                ],
            )
            for card in (0, 1)
        ]
        document = {
            "description": "secrets in command lines",
            "driver_version": "550.127.05",
            "cuda_driver_version": 12040,
            "gpus": gpus,
        }
        scenario = directory / "secrets.json"
        scenario.write_text(json.dumps(document))
        scenario.chmod(0o644)
        yield Corpus(str(scenario), tuple(p.pid for p in started), directory)
    finally:
        for process in started:
            process.kill()
            process.wait()


def _leaked(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


def _commands_by_pid(exposition: str) -> dict[str, str]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        sample.labels["pid"]: sample.labels["command"]
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == "gputop_process_memory_used_bytes"
    }


def test_no_secret_reaches_the_exporters_metrics(corpus: Corpus) -> None:
    args = ("--fake", corpus.scenario, "--listen", "127.0.0.1:0", "--interval", "3600")
    with running_exporter(*args) as exporter:
        exposition = exporter.scrape()
    assert _leaked(exposition) == []
    commands = _commands_by_pid(exposition)
    assert set(commands) == {str(pid) for pid in corpus.pids}
    for pid, command in commands.items():
        assert REDACTED in command, (pid, command)
        # the program shows; the code given with -c is a shell-like command: its first word
        assert command.startswith(sys.executable + " -c import " + REDACTED), command


def test_a_second_users_shell_command_reaches_metrics_with_its_secrets_hidden(
    tmp_path: Path,
) -> None:
    """A real process of another user (uid 65534): ``bash -c '…'`` holding secrets in forms
    no list of forms had (``sshpass -p``, ``-u user:pw``, ``MYSQL_PWD=``, a query's token).
    ``/metrics`` names the program and what it may show, nothing else."""
    from gputop.core.sampling.pid_namespace import detect_pid_namespace

    require_root()
    if detect_pid_namespace().nested:
        pytest.skip("a nested PID namespace: the fake cannot list this test's own pids")
    script = (
        "sleep 600; MYSQL_PWD=envpw8a1 mysql -pclusterpw8b2 -h db; "
        "sshpass -p sshpw8c3 ssh host && curl -u admin:curlpw8d4 "
        "'https://h.example/x?token=qtok8e5&sig=qsig8f6'"
    )
    secrets = ("envpw8a1", "clusterpw8b2", "sshpw8c3", "curlpw8d4", "qtok8e5", "qsig8f6")
    process = subprocess.Popen(
        ["/bin/bash", "-c", script],
        user=OTHER_UID,
        group=OTHER_GID,
        extra_groups=[],
        cwd="/",
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        cmdline = Path(f"/proc/{process.pid}/cmdline")
        wait_for(lambda: b"sshpw8c3" in cmdline.read_bytes(), "bash to exec")
        gpu = minimal_gpu(
            uuid="GPU-11111111-aaaa-bbbb-cccc-000000000009",
            pci_bus_id="00000000:09:00.0",
            processes=[{"pid": process.pid, "used_memory_mib": 100, "type": "C"}],
        )
        scenario = tmp_path / "other.json"
        scenario.write_text(
            json.dumps(
                {
                    "description": "another user's shell command",
                    "driver_version": "550.127.05",
                    "cuda_driver_version": 12040,
                    "gpus": [gpu],
                }
            )
        )
        args = ("--fake", str(scenario), "--listen", "127.0.0.1:0", "--interval", "3600")
        with running_exporter(*args) as exporter:
            exposition = exporter.scrape()
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert [secret for secret in secrets if secret in exposition] == []
    assert _commands_by_pid(exposition) == {
        str(process.pid): (
            "/bin/bash -c sleep 600; MYSQL_PWD=*** mysql -p*** -h ***; "
            "sshpass -p *** *** *** && curl -u *** 'https://h.example/x?***'"
        )
    }
    users = {
        sample.labels["user"]
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == "gputop_process_memory_used_bytes"
    }
    assert users == {pwd.getpwuid(OTHER_UID).pw_name}


@pytest.mark.parametrize(("form", "shown"), [("name", "python"), ("none", "")])
def test_the_exporter_writes_only_the_program_or_nothing_when_asked(
    corpus: Corpus, form: str, shown: str
) -> None:
    args = ("--fake", corpus.scenario, "--listen", "127.0.0.1:0", "--interval", "3600")
    with running_exporter(*args, "--command-label", form) as exporter:
        exposition = exporter.scrape()
    commands = _commands_by_pid(exposition)
    assert set(commands) == {str(pid) for pid in corpus.pids}
    program = os.path.basename(sys.executable)
    assert set(commands.values()) == ({program} if form == "name" else {""})
    assert program.startswith(shown)
    assert SLEEP not in exposition and _leaked(exposition) == []


def _record(corpus: Corpus, store: Path, *options: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputop",
            "record",
            "--fake",
            corpus.scenario,
            "--db",
            str(store),
            "--interval",
            "0.5",
            "--count",
            "2",
            *options,
        ],
        env={**os.environ, "GPUTOP_STATE_DIR": str(corpus.directory / "state")},
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _bytes_of(directory: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file())


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A directory both users can reach (tmp_path's parents are root's only)."""
    require_root()
    directory = Path(tempfile.mkdtemp(prefix="gputop-secrets-", dir="/tmp"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_no_secret_reaches_a_shared_store_or_its_report(corpus: Corpus, reachable: Path) -> None:
    store = reachable / "history" / "history.sqlite3"
    _record(corpus, store, "--readable-by", "all")
    assert [s for s in SECRETS if s.encode() in _bytes_of(store.parent)] == []
    report = gputop_as_other_user(
        "report", "--db", str(store), "--by", "process", "--json", *WINDOW, env={}
    )
    assert report.returncode == 0, report.stderr
    assert _leaked(report.stdout + report.stderr) == []
    rows = json.loads(report.stdout)["rows"]
    assert {row["key"] for row in rows} == set(corpus.pids)
    assert all(REDACTED in row["command"] for row in rows)
    table = gputop_as_other_user("report", "--db", str(store), "--by", "process", *WINDOW, env={})
    assert table.returncode == 0, table.stderr
    assert _leaked(table.stdout) == []


@pytest.mark.parametrize("form", ["name", "none"])
def test_a_shared_store_keeps_only_the_program_or_no_command_when_asked(
    corpus: Corpus, reachable: Path, form: str
) -> None:
    store = reachable / "history" / "history.sqlite3"
    _record(corpus, store, "--readable-by", "all", "--command-label", form)
    written = _bytes_of(store.parent)
    assert SLEEP.encode() not in written
    assert [s for s in SECRETS if s.encode() in written] == []
    report = gputop_as_other_user(
        "report", "--db", str(store), "--by", "process", "--json", *WINDOW, env={}
    )
    assert report.returncode == 0, report.stderr
    commands = {row["command"] for row in json.loads(report.stdout)["rows"]}
    assert commands == ({os.path.basename(sys.executable)} if form == "name" else {None})


def test_a_private_store_keeps_its_owners_commands_whole_for_the_owner(corpus: Corpus) -> None:
    store = corpus.directory / "private" / "history.sqlite3"
    _record(corpus, store)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputop",
            "report",
            "--db",
            str(store),
            "--by",
            "process",
            "--json",
            *WINDOW,
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(_leaked(done.stdout)) == sorted(SECRETS)  # the owner's own view


def test_no_secret_reaches_the_lab_protocol(corpus: Corpus) -> None:
    """The agent runs as root here: every process is someone else's for its reader, and its
    history answer comes from a private store that keeps commands whole."""
    store = corpus.directory / "agent" / "history.sqlite3"
    _record(corpus, store)
    agent = subprocess.Popen(
        [sys.executable, "-m", "gputop", "agent", "--fake", corpus.scenario, "--interval", "0.2"],
        env={**os.environ, "GPUTOP_HISTORY_DB": str(store)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert agent.stdin is not None and agent.stdout is not None
    lines: list[str] = []
    try:
        request = {"type": "history_request", "id": 1, "window_s": 86400, "by": "process"}
        agent.stdin.write(json.dumps(request) + "\n")
        agent.stdin.flush()
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            line = agent.stdout.readline()
            assert line, "the agent stopped before answering"
            lines.append(line)
            if json.loads(line)["type"] == "history":
                break
        agent.stdin.close()
        assert agent.wait(timeout=WAIT_S) == 0
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert _leaked("".join(lines)) == []
    messages = [json.loads(line) for line in lines]
    snapshot = next(m["snapshot"] for m in messages if m["type"] == "snapshot")
    commands = [p["command"] for gpu in snapshot["gpus"] for p in gpu["processes"]]
    assert len(commands) == len(corpus.pids)
    assert all(REDACTED in " ".join(command) for command in commands)
    answer = messages[-1]
    assert answer["type"] == "history" and answer["error"] is None
    rows = answer["report"]["rows"]
    assert {row["key"] for row in rows} == set(corpus.pids)
    assert all(REDACTED in row["command"] for row in rows)


def test_a_report_from_a_store_others_may_read_redacts_what_an_older_recorder_kept(
    corpus: Corpus, reachable: Path
) -> None:
    """A store recorded whole (private, or by a gputop before the redactor) and opened to
    others later: ``report`` redacts when it reads, for whoever reads."""
    store = reachable / "history" / "history.sqlite3"
    _record(corpus, store)
    assert [s for s in SECRETS if s.encode() in _bytes_of(store.parent)] != []  # kept whole
    store.parent.chmod(0o755)
    for path in store.parent.iterdir():
        path.chmod(0o644)
    for report in (
        gputop_as_other_user("report", "--db", str(store), "--by", "process", *WINDOW, env={}),
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gputop",
                "report",
                "--db",
                str(store),
                "--by",
                "process",
                *list(WINDOW),
            ],
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            check=False,
        ),
    ):
        assert report.returncode == 0, report.stderr
        assert _leaked(report.stdout) == []
        assert REDACTED in report.stdout
