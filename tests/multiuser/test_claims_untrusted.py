"""Claims under a hostile second user (docs/claims.md, docs/security.md "Claims another user
writes"): files no decoder can read, a kernel lease that hides a file, claims planted by hand,
a flood, hard links. Real users, a real lease, real links."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.claims import (
    User,
    as_user,
    book_of,
    claim_name,
    ended_job,
    gputop_as,
    holders,
    no_crash,
    plant,
    python_for_users,
    uuids,
)
from helpers.waiting import wait_for

from gputop.core.claims.files import CONTENT_BYTES, content

UNPARSEABLE = {  # content, and why it is no claim
    "nested": (b"[" * CONTENT_BYTES, "nested too deeply"),
    "huge until": (
        b'{"v":1,"uuid":"%s","gpu":1,"uid":%d,"user":"%s","until":'
        + b"9" * 401
        + b',"note":"","job":null}',
        "end time is not a number",
    ),
    "bad utf-8": (b'{"v":1,"note":"\xff\xfe"}', "unreadable content"),
    "float until": (
        b'{"v":1,"uuid":"%s","gpu":1,"uid":%d,"user":"%s","until":1e400,"note":"","job":null}',
        "end time is not a number",
    ),
}


@pytest.mark.parametrize("kind", sorted(UNPARSEABLE))
def test_a_file_no_decoder_reads_is_that_files_problem_for_every_command(
    two_users: tuple[User, User], claims_dir: Path, kind: str
) -> None:
    ana, bob = two_users
    gpu1 = uuids()[1]
    data, why = UNPARSEABLE[kind]
    if b"%s" in data:
        data = data % (gpu1.encode(), bob.uid, bob.name.encode())
    plant(bob, claims_dir, claim_name(gpu1, bob, 0xAA), data.ljust(CONTENT_BYTES))
    # every command reads the directory through one scan (each kind of content is read by
    # tests/unit/test_claim_files.py): all of them past the two forms (the deepest
    # nesting, a 401-digit end), the readers alone past the others
    every = [
        ["claim", "--gpus", "2"],
        ["claim", "--extend"],
        ["release"],
        ["pick", "--format", "index"],
        ["run", "--gpus", "3", "--", "true"],
        ["run", "--ignore-claims", "--gpus", "1", "--", "true"],
        ["record", "--count", "1", "--interval", "1"],
    ]
    readers = [["claims"], ["claims", "--json"], ["snapshot", "--json"]]
    for argv in readers + every if kind in ("nested", "huge until") else readers:
        done = gputop_as(ana, claims_dir, *argv)
        no_crash(done)
    refused = gputop_as(ana, claims_dir, "claim", "--gpus", "1")
    no_crash(refused)
    assert refused.returncode == 1 and f"may be claimed by {bob.name}" in refused.stderr
    blocked = gputop_as(ana, claims_dir, "run", "--gpus", "1", "--", "true")
    assert blocked.returncode == 1 and f"may be claimed by {bob.name}" in blocked.stderr

    def judged() -> list:
        with book_of(claims_dir) as book:
            return book.scan().suspicious

    # a file younger than PENDING_S may be one being written: judged once it is older
    suspicious = wait_for(judged, "bob's file to be judged suspicious")
    assert [odd.uid for odd in suspicious] == [bob.uid]
    assert why in suspicious[0].reason


def test_the_exporter_and_a_sample_go_on_past_a_file_no_decoder_reads(
    two_users: tuple[User, User], claims_dir: Path, fake_backend
) -> None:
    from helpers.exporter import samples

    from gputop.core.exporter.collector import SnapshotCollector

    ana, bob = two_users
    gpu = uuids()
    plant(bob, claims_dir, claim_name(gpu[1], bob, 0xAB), (b"[" * CONTENT_BYTES))
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "2").returncode == 0
    collector = SnapshotCollector(top=5)
    collector.record(fake_backend("v100x4").sample(), 0.01)
    assert len(samples(collector, "gputop_gpu_processes")) == 4  # every GPU's metrics
    claimed = samples(collector, "gputop_gpu_claimed")
    assert [(s.labels["gpu"], s.labels["user"]) for s in claimed] == [("2", ana.name)]


def test_a_jobs_renewal_past_a_file_no_decoder_reads_says_so_and_raises_nothing(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    from gputop.core.claims.book import Card
    from gputop.core.claims.jobs import JobClaim

    _, bob = two_users
    gpu = uuids()
    job = JobClaim(7, {"GPUTOP_CLAIMS_DIR": str(claims_dir)})
    assert job.take([Card(gpu[0], 0, "GPU 0")], "train") is None
    plant(bob, claims_dir, claim_name(gpu[0], bob, 0xAC), b'{"a":' * 300)
    plant(bob, claims_dir, claim_name(gpu[3], bob, 0xAD), b"[" * CONTENT_BYTES)
    job._renewed -= 3600  # due
    assert job.renew() is None  # renewed: the junk is no claim, and behind the job's
    assert holders(claims_dir) == [(0, "root")]


@pytest.fixture(name="lease_holder")
def lease_holder_fixture() -> Iterator[list[subprocess.Popen]]:
    held: list[subprocess.Popen] = []
    yield held
    for process in held:
        process.kill()
        process.wait(timeout=10)


LEASE = (
    "import fcntl, os, signal, sys\n"
    "signal.signal(signal.SIGIO, signal.SIG_IGN)\n"  # a lease break must not end it
    "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
    "fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)\n"
    "print('held', flush=True)\n"
    "sys.stdin.readline()\n"
    "fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)\n"
    "print('dropped', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_a_claim_hidden_behind_a_lease_is_a_possible_earlier_holder(
    two_users: tuple[User, User], claims_dir: Path, lease_holder: list[subprocess.Popen]
) -> None:
    ana, bob = two_users
    gpu1 = uuids()[1]
    name = claim_name(gpu1, bob, 0xBB)
    plant(bob, claims_dir, name, content(gpu1, 1, bob.uid, bob.name, time.time() + 3600, "", None))
    python, _ = python_for_users()
    process = subprocess.Popen(
        [python, "-c", LEASE, str(claims_dir / name)],
        user=bob.uid,
        group=bob.gid,
        extra_groups=[],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    lease_holder.append(process)
    assert process.stdout is not None and process.stdin is not None
    assert process.stdout.readline() == "held\n"
    with pytest.raises(BlockingIOError):  # the lease is real: a non-blocking open fails
        os.close(os.open(claims_dir / name, os.O_RDONLY | os.O_NONBLOCK))
    refused = gputop_as(ana, claims_dir, "claim", "--gpus", "1")
    no_crash(refused)
    assert refused.returncode == 1, refused.stdout
    assert f"may be claimed by {bob.name}" in refused.stderr
    ran = gputop_as(ana, claims_dir, "run", "--gpus", "1", "--", "true")
    assert ran.returncode == 1 and f"may be claimed by {bob.name}" in ran.stderr
    process.stdin.write("\n")
    process.stdin.flush()
    assert process.stdout.readline() == "dropped\n"
    assert gputop_as(ana, claims_dir, "claims").returncode == 0
    assert holders(claims_dir) == [(1, bob.name)]
    assert all(f".{ana.uid}." not in entry for entry in os.listdir(claims_dir))


def test_a_claim_planted_behind_anothers_neither_blocks_its_extension_nor_inherits_the_card(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    gpu3 = uuids()[3]
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "3", "--for", "1h").returncode == 0
    now = time.time()
    plant(
        bob,
        claims_dir,
        claim_name(gpu3, bob, 0xC1),
        content(gpu3, 3, bob.uid, bob.name, now + 6 * 3600, "", None),
    )
    bogus = content(gpu3, 3, bob.uid, bob.name, now + 300 * 86400, "", None)
    plant(bob, claims_dir, claim_name(gpu3, bob, 0xC2), bogus)
    in_her_name = content(gpu3, 3, ana.uid, ana.name, now + 3600, "", None)
    plant(bob, claims_dir, claim_name(gpu3, ana, 0xC3), in_her_name)  # the owner is bob
    extended = gputop_as(ana, claims_dir, "claim", "--extend", "--for", "3h")
    assert extended.returncode == 0, extended.stderr
    assert "Extended GPU 3" in extended.stdout
    assert holders(claims_dir) == [(3, ana.name)]
    released = gputop_as(ana, claims_dir, "release")
    assert released.returncode == 0, released.stderr
    assert holders(claims_dir) == []  # bob's plant was made while ana held the card
    listed = json.loads(gputop_as(bob, claims_dir, "claims", "--json").stdout)
    assert listed == []
    ran = gputop_as(ana, claims_dir, "run", "--gpus", "3", "--", "true")
    assert ran.returncode == 0, ran.stderr
    # The job holds the card while it runs; its supervisor gives the claim back at its end
    # (not bob, whose plant was never a claim). Its claim is taken after `run` returns, so
    # the wait is for the job's end, not for no holder.
    assert ended_job(ana, claims_dir)["status_text"] == "exited 0"
    assert holders(claims_dir) == []
    again = gputop_as(ana, claims_dir, "claim", "--gpus", "3")
    assert again.returncode == 0, again.stderr
    assert holders(claims_dir) == [(3, ana.name)]


def test_a_flood_of_the_directory_makes_run_refuse_where_it_cannot_tell(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "2").returncode == 0
    flood = (
        "import os, sys\n"
        "for i in range(10_001):\n"
        "    os.close(os.open(os.path.join(sys.argv[1], f'x{i}'), os.O_CREAT | os.O_WRONLY))\n"
    )
    python, _ = python_for_users()
    assert as_user(bob, [python, "-c", flood, str(claims_dir)], {}).returncode == 0
    refused = gputop_as(bob, claims_dir, "run", "--gpus", "2", "--", "true")
    assert refused.returncode == 1, refused.stderr
    assert "Nothing was launched" in refused.stderr and "flooded" in refused.stderr
    anyway = gputop_as(bob, claims_dir, "run", "--ignore-claims", "--gpus", "2", "--", "true")
    assert anyway.returncode == 0, anyway.stderr
    jobs = json.loads(gputop_as(bob, claims_dir, "jobs", "--json").stdout)
    (job,) = jobs
    assert "claims cannot be read" in job["env"]["GPUTOP_IGNORED_CLAIMS"]


@pytest.fixture(name="hard_links_allowed")
def hard_links_allowed_fixture() -> Iterator[None]:
    """``fs.protected_hardlinks=0`` for the test (any user may link any file), restored."""
    setting = Path("/proc/sys/fs/protected_hardlinks")
    try:
        before = setting.read_text().strip()
        setting.write_text("0")
    except OSError as error:
        pytest.skip(f"cannot set fs.protected_hardlinks: {error}")
    try:
        yield
    finally:
        setting.write_text(before)


def test_a_hard_link_neither_hides_a_claim_nor_moves_it_back_in_line(
    two_users: tuple[User, User], claims_dir: Path, shared_dir: Path, hard_links_allowed: None
) -> None:
    ana, bob = two_users
    gpu1 = uuids()[1]
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "1").returncode == 0
    (theirs,) = os.listdir(claims_dir)
    plant(
        bob,
        claims_dir,
        claim_name(gpu1, bob, 0xD1),
        content(gpu1, 1, bob.uid, bob.name, time.time() + 3600, "", None),
    )
    link = (
        "import os, sys\n"
        "os.link(sys.argv[1], sys.argv[2])\n"  # another name for ana's file, in the claims
        "away = os.path.join(sys.argv[3], 'mine')\n"  # and one bob can remove again
        "os.mkdir(away)\n"
        "os.link(sys.argv[1], os.path.join(away, 'x'))\n"
        "os.unlink(os.path.join(away, 'x'))\n"
    )
    python, _ = python_for_users()
    linked = as_user(
        bob,
        [
            python,
            "-c",
            link,
            str(claims_dir / theirs),
            str(claims_dir / claim_name(gpu1, bob, 0xD2)),
            str(shared_dir),
        ],
        {},
    )
    assert linked.returncode == 0, linked.stderr
    assert os.stat(claims_dir / theirs).st_nlink == 2
    assert holders(claims_dir) == [(1, ana.name)]
    refused = gputop_as(bob, claims_dir, "claim", "--gpus", "1")
    assert refused.returncode == 1 and f"claimed by {ana.name}" in refused.stderr
    ran = gputop_as(bob, claims_dir, "run", "--gpus", "1", "--", "true")
    assert ran.returncode == 1 and f"claimed by {ana.name}" in ran.stderr


def test_setup_of_a_sound_directory_says_nothing_needed_fixing(claims_dir: Path, capsys) -> None:
    from gputop.cli.main import main

    assert main(["claims", "--setup"]) == 0
    said = capsys.readouterr().out
    assert "Fixed" not in said and "already" in said
    os.chmod(claims_dir, 0o755)
    assert main(["claims", "--setup"]) == 0
    assert "Fixed" in capsys.readouterr().out
    assert wait_for(lambda: os.stat(claims_dir).st_mode & 0o7777 == 0o1777, "the mode")


def test_an_agent_goes_on_past_a_file_no_decoder_reads(
    two_users: tuple[User, User], claims_dir: Path, tmp_path: Path
) -> None:
    import sys

    _, bob = two_users
    gpu = uuids()
    plant(bob, claims_dir, claim_name(gpu[1], bob, 0xE1), b"[" * CONTENT_BYTES)  # bob's, maybe
    with book_of(claims_dir) as book:
        from gputop.core.claims.book import Card

        book.claim([Card(gpu[2], 2, "GPU 2")], 3600)
    agent = subprocess.Popen(
        [sys.executable, "-m", "gputop", "agent", "--fake", "v100x4", "--interval", "0.2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={
            "PATH": "/usr/bin:/bin",
            "GPUTOP_STATE_DIR": str(tmp_path / "state"),
            "GPUTOP_CLAIMS_DIR": str(claims_dir),
        },
    )
    assert agent.stdout is not None and agent.stdin is not None and agent.stderr is not None
    try:
        lines = [agent.stdout.readline() for _ in range(2)]
    finally:
        agent.stdin.close()
        agent.wait(10)
    assert all(lines), agent.stderr.read().decode(errors="replace")
    gpus = json.loads(lines[1])["snapshot"]["gpus"]
    assert gpus[2]["claim"]["user"] == "root" and gpus[2]["claim"]["certain"] is True
    assert gpus[1]["claim"]["user"] == bob.name and gpus[1]["claim"]["certain"] is False


async def test_the_dashboards_first_sample_comes_past_a_file_no_decoder_reads(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    from helpers.dashboard import first_sample

    from gputop.tui.screenshots import build_app

    _, bob = two_users
    gpu = uuids()
    plant(bob, claims_dir, claim_name(gpu[1], bob, 0xE2), b"[" * CONTENT_BYTES)
    app = build_app("v100x4")
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        assert app.snapshot is not None and len(app.snapshot.gpus) == 4


SITE = (
    "import os\n"
    "if os.environ.get('GPUTOP_TEST_RENEW_S'):\n"
    "    import gputop.core.claims.jobs as jobs\n"
    "    jobs.RENEW_AFTER_S = float(os.environ['GPUTOP_TEST_RENEW_S'])\n"
)


def test_a_jobs_supervisor_renews_past_a_file_no_decoder_reads_and_obeys_a_stop(
    two_users: tuple[User, User],
    state_dir: Path,
    claims_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real supervisor, its renewal made due every 0.2 s (a sitecustomize on its path)."""
    from helpers.jobs import PYTHON, wait_until_ended, wait_until_running

    from gputop.cli.main import main

    _, bob = two_users
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    )
    monkeypatch.setenv("GPUTOP_TEST_RENEW_S", "0.2")
    flag = tmp_path / "done"
    code = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)"
    assert (
        main(["--fake", "v100x4", "run", "--gpus", "0", "--", PYTHON, "-c", code, str(flag)]) == 0
    )
    (job_id,) = [j.id for j in __import__("helpers.jobs").jobs.all_jobs(state_dir)]
    wait_until_running(state_dir, job_id)

    def the_jobs() -> list[str]:
        with book_of(claims_dir) as book:
            return [c.name for c in book.scan().claims if c.job == job_id]

    (name,) = wait_for(the_jobs, "the job's claim")
    plant(bob, claims_dir, claim_name(uuids()[0], bob, 0xF1), b"[" * CONTENT_BYTES)
    planted = os.stat(claims_dir / name).st_ctime_ns
    wait_for(lambda: os.stat(claims_dir / name).st_ctime_ns > planted, "a renewal past bob's file")
    assert main(["jobs", "stop", str(job_id), "--yes"]) == 0
    ended = wait_until_ended(state_dir, job_id)
    assert ended.status == "killed", ended.status_text
    assert holders(claims_dir) == []


def test_a_jobs_renewal_is_not_blocked_by_a_claim_planted_behind_it(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    from gputop.core.claims.book import Card
    from gputop.core.claims.jobs import JobClaim

    _, bob = two_users
    gpu0 = uuids()[0]
    job = JobClaim(8, {"GPUTOP_CLAIMS_DIR": str(claims_dir)})
    assert job.take([Card(gpu0, 0, "GPU 0")], "train") is None
    behind = content(gpu0, 0, bob.uid, bob.name, time.time() + 3600, "", None)
    plant(bob, claims_dir, claim_name(gpu0, bob, 0xF2), behind)
    job._renewed -= 3600  # due
    assert job.renew() is None
    assert holders(claims_dir) == [(0, "root")]
    job.release()  # the job ends: bob's plant still does not get the card
    assert holders(claims_dir) == []


def test_a_running_exporter_answers_with_every_gpu_past_a_file_no_decoder_reads(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    from helpers.prometheus import running_exporter

    _, bob = two_users
    plant(bob, claims_dir, claim_name(uuids()[1], bob, 0xE3), b"[" * CONTENT_BYTES)
    args = ("--fake", "v100x4", "--listen", "127.0.0.1:0", "--interval", "3600")
    with running_exporter(*args) as exporter:
        exposition = exporter.scrape()
    processes = [
        line for line in exposition.splitlines() if line.startswith("gputop_gpu_processes{")
    ]
    assert len(processes) == 4, exposition[-2000:]


def test_a_claims_directory_a_user_cannot_open_is_said_not_an_internal_error(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, _ = two_users
    os.chmod(claims_dir, 0o700)  # root's, and unreadable to the others
    for argv in (["claims"], ["claim", "--gpus", "1"], ["release"]):
        done = gputop_as(ana, claims_dir, *argv)
        no_crash(done)
        assert done.returncode == 1 and "cannot be opened" in done.stderr, done.stderr
    ran = gputop_as(ana, claims_dir, "run", "--gpus", "1", "--", "true")
    assert ran.returncode == 0 and "cannot be opened" in ran.stderr, ran.stderr


def test_an_extension_that_cannot_rewrite_its_file_says_so_not_an_internal_error(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, _ = two_users
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "1", "--for", "1h").returncode == 0
    (name,) = os.listdir(claims_dir)
    python, _ = python_for_users()
    chmod = as_user(
        ana, [python, "-c", f"import os; os.chmod({str(claims_dir / name)!r}, 0o444)"], {}
    )
    assert chmod.returncode == 0, chmod.stderr
    extended = gputop_as(ana, claims_dir, "claim", "--extend", "--for", "2h")
    no_crash(extended)
    assert extended.returncode == 1 and "Cannot rewrite the claim" in extended.stderr
    assert holders(claims_dir) == [(1, ana.name)]


def test_of_two_claimers_of_one_user_the_one_still_writing_an_earlier_file_wins(
    claims_dir: Path,
) -> None:
    """Ordered by birth, a file being written is already in line: another claimer of the
    same user deciding meanwhile loses to it, so exactly one of the two wins."""
    import pwd

    from gputop.core.claims.book import Card, ClaimRefused, _coarse_now_ns
    from gputop.core.claims.files import new_name

    gpu2 = uuids()[2]
    card = Card(gpu2, 2, "GPU 2")
    first = new_name(gpu2, os.geteuid(), False)
    fd = os.open(claims_dir / first, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:  # the first claimer has made its file and not yet written it
        made = os.stat(claims_dir / first).st_ctime_ns  # its birth, at the clock's step
        wait_for(lambda: _coarse_now_ns() > made, "the clock to pass its birth")
        with book_of(claims_dir) as book, pytest.raises(ClaimRefused, match="came first"):
            book.claim([card], 3600)
        user = pwd.getpwuid(os.geteuid()).pw_name
        os.write(fd, content(gpu2, 2, os.geteuid(), user, time.time() + 3600, "", None))
    finally:
        os.close(fd)
    with book_of(claims_dir) as book:
        book._decide([card], [first], strict=True)  # the first claimer decides: it won
    assert os.listdir(claims_dir) == [first]
