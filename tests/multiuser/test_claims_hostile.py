"""Claims attacked (docs/claims.md): floods, planted links and FIFOs, half-written files,
clock steps, MIG instances, extensions; with two real users where a user matters."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers.claims import User, as_user, gputop_as, python_for_users

from gputop.core.claims.book import Card, ClaimBook, ClaimRefused
from gputop.core.claims.files import MAX_FOR_S

GPU2 = "GPU-b7f5a3c1"  # a prefix is enough for --gpus; the book needs the whole UUID


def book_of(directory: Path) -> ClaimBook:
    book = ClaimBook.open({"GPUTOP_CLAIMS_DIR": str(directory)})
    assert book is not None
    return book


def run_as(user: User, script: str, *args: str) -> None:
    python, _ = python_for_users()
    done = as_user(user, [python, "-c", script, *args], {})
    assert done.returncode == 0, done.stderr


def uuid_of(directory: Path, user: User, index: int, fake: str = "v100x4") -> str:
    import json

    shown = gputop_as(user, directory, "snapshot", "--json", fake=fake)
    return json.loads(shown.stdout)["gpus"][index]["uuid"]


def test_a_users_flood_of_files_makes_claims_unusable_for_that_user_only(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    uuid = uuid_of(claims_dir, bob, 1)
    flood = (
        "import os, sys\n"
        "for i in range(300):\n"
        "    name = f'{sys.argv[2]}.{os.getuid()}.c{i:016x}.claim'\n"
        "    open(os.path.join(sys.argv[1], name), 'w').close()\n"
    )
    run_as(bob, flood, str(claims_dir), uuid)
    # none of bob's files is believed; each is his possible hold on the card it names
    held = gputop_as(ana, claims_dir, "claim", "--gpus", "1")
    assert held.returncode == 1 and f"GPU 1 may be claimed by {bob.name}" in held.stderr
    assert "more than 256" in held.stderr
    made = gputop_as(ana, claims_dir, "claim", "--gpus", "2")
    assert made.returncode == 0, made.stderr
    refused = gputop_as(bob, claims_dir, "claim", "--gpus", "2")
    assert refused.returncode == 1 and f"claimed by {ana.name}" in refused.stderr
    his = gputop_as(bob, claims_dir, "claim", "--gpus", "3")  # his 301st file: not believed
    assert his.returncode == 1, his.stdout
    with book_of(claims_dir) as book:
        scan = book.scan()
    assert [c.user for c in scan.claims] == [ana.name]
    assert any("more than 256" in odd.reason and odd.uid == bob.uid for odd in scan.suspicious)


def test_planted_links_fifos_and_directories_are_never_followed_nor_block_a_reader(
    two_users: tuple[User, User], claims_dir: Path, tmp_path: Path
) -> None:
    ana, bob = two_users
    uuid = uuid_of(claims_dir, bob, 1)
    plant = (
        "import os, sys\n"
        "d, uuid, uid = sys.argv[1], sys.argv[2], os.getuid()\n"
        "os.mkfifo(os.path.join(d, f'{uuid}.{uid}.c000000000000000a.claim'), 0o644)\n"
        "os.symlink('/etc/shadow', os.path.join(d, f'{uuid}.{uid}.c000000000000000b.claim'))\n"
        "os.mkdir(os.path.join(d, f'{uuid}.{uid}.c000000000000000c.claim'))\n"
        "open(os.path.join(d, 'README'), 'w').close()\n"
    )
    run_as(bob, plant, str(claims_dir), uuid)
    listed = gputop_as(ana, claims_dir, "claims")  # a FIFO opened for reading would block
    assert listed.returncode == 0
    assert f"GPU 1  {uuid}  may be claimed by {bob.name}: not a regular file" in listed.stdout
    held = gputop_as(ana, claims_dir, "claim", "--gpus", "1")  # bob's, if anyone's
    assert held.returncode == 1 and f"may be claimed by {bob.name}" in held.stderr
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "2").returncode == 0
    with book_of(claims_dir) as book:
        reasons = sorted(odd.reason for odd in book.scan().suspicious)
    assert reasons == ["not a claim's name", *["not a regular file"] * 3]


def test_a_half_written_file_is_never_a_claim_keeps_others_off_and_its_owner_removes_it(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    uuid = uuid_of(claims_dir, bob, 1)
    stopped = (
        "import os, sys\n"
        "name = f'{sys.argv[2]}.{os.getuid()}.c00000000000000ff.claim'\n"
        "os.close(os.open(os.path.join(sys.argv[1], name), os.O_CREAT | os.O_WRONLY, 0o644))\n"
    )
    run_as(bob, stopped, str(claims_dir), uuid)  # a claimer that died before writing
    held = gputop_as(ana, claims_dir, "claim", "--gpus", "1")  # bob's might yet be written
    assert held.returncode == 1 and f"GPU 1 may be claimed by {bob.name}" in held.stderr
    leftover = f"{uuid}.{bob.uid}.c00000000000000ff.claim"
    assert (claims_dir / leftover).exists()  # ana cannot remove it, and does not try

    def settled() -> bool:
        with book_of(claims_dir) as book:
            return any(name == leftover for name, _ in book.scan().stale)

    deadline = time.monotonic() + 30
    while not settled():  # the kernel's change time must age: nothing to set
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert gputop_as(bob, claims_dir, "claims").returncode == 0
    assert not (claims_dir / leftover).exists()
    made = gputop_as(ana, claims_dir, "claim", "--gpus", "1")
    assert made.returncode == 0, made.stderr


def test_a_clock_stepped_forward_ends_a_claim_and_its_owner_removes_it(claims_dir: Path) -> None:
    with book_of(claims_dir) as book:
        (made,) = book.claim([Card("GPU-" + "1" * 32, 1, "GPU 1")], 3600)
        book.clock = lambda: time.time() + 7200
        scan = book.scan()
        assert scan.claims == [] and [c.name for c in scan.expired] == [made.name]
        book.tidy(scan)
    assert os.listdir(claims_dir) == []


def test_a_clock_stepped_back_makes_a_claim_last_longer_but_never_past_seven_days(
    claims_dir: Path,
) -> None:
    with book_of(claims_dir) as book:
        (made,) = book.claim([Card("GPU-" + "2" * 32, 2, "GPU 2")], MAX_FOR_S)
        book.clock = lambda: time.time() - 86400  # as if the clock went back a day
        assert [c.name for c in book.scan().claims] == [made.name]
        with pytest.raises(ClaimRefused, match="already claimed by you"):
            book.claim([Card("GPU-" + "2" * 32, 2, "GPU 2")], 3600)


def test_extending_keeps_the_card_and_moves_its_end(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "3", "--for", "1h").returncode == 0
    extended = gputop_as(ana, claims_dir, "claim", "--extend", "--for", "3d")
    assert extended.returncode == 0, extended.stderr
    assert "Extended GPU 3" in extended.stdout
    with book_of(claims_dir) as book:
        (held,) = book.scan().holders().values()
    assert held.user == ana.name and 3 * 86400 - 60 < held.until - time.time() <= 3 * 86400
    nothing = gputop_as(bob, claims_dir, "claim", "--extend")
    assert nothing.returncode == 1 and "You hold no claim to extend" in nothing.stderr
    theirs = gputop_as(bob, claims_dir, "claim", "--extend", "--gpus", "3")
    assert theirs.returncode == 1 and "You hold no claim on" in theirs.stderr
    assert gputop_as(bob, claims_dir, "claim", "--gpus", "3").returncode == 1
    # Asking for less than is left never shortens a claim, and says it kept it.
    shorter = gputop_as(ana, claims_dir, "claim", "--extend", "--for", "2h")
    assert shorter.returncode == 0, shorter.stderr
    assert "Extended" not in shorter.stdout and "Kept GPU 3" in shorter.stdout
    with book_of(claims_dir) as book:
        (kept,) = book.scan().holders().values()
    assert kept.until == held.until and kept.ctime_ns == held.ctime_ns  # not even rewritten


def test_a_mig_instance_claim_keeps_others_off_its_gpu_but_not_off_other_instances(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    made = gputop_as(ana, claims_dir, "claim", "--gpus", "0:1", fake="mig")
    assert made.returncode == 0, made.stderr
    whole = gputop_as(bob, claims_dir, "claim", "--gpus", "0", fake="mig")
    assert whole.returncode == 1
    assert f"GPU 0 is not free: {ana.name} claimed MIG-4fd95d93" in whole.stderr
    other = gputop_as(bob, claims_dir, "claim", "--gpus", "0:2", fake="mig")
    assert other.returncode == 0, other.stderr
    run = gputop_as(bob, claims_dir, "run", "--gpus", "0:1", "--", "true", fake="mig")
    assert run.returncode == 1 and f"claimed by {ana.name}" in run.stderr
    assert gputop_as(ana, claims_dir, "release").returncode == 0
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "0", fake="mig").returncode == 1


@pytest.mark.parametrize(
    ("ctime_ns", "step"),
    [(1_700_000_000_000_000_000, 1_000_000_000), (1_700_000_000_123_000_000, 1_000_000), (7, 1)],
)
def test_the_decision_waits_out_the_file_systems_time_step(ctime_ns: int, step: int) -> None:
    """Whole-second stamps (ext3) make a claimer wait for the next second before it looks:
    a file written in the same second would tie with its own (docs/claims.md)."""
    from gputop.core.claims.book import _granularity_ns

    assert _granularity_ns(ctime_ns) == step


def test_a_claimer_decides_only_once_the_clock_has_passed_its_files_change_time(
    claims_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gputop.core.claims import book as book_module

    looks: list[int] = []
    made: list[int] = []
    real_scan = ClaimBook.scan

    def scan(self: ClaimBook) -> object:
        looks.append(book_module._coarse_now_ns())
        return real_scan(self)

    monkeypatch.setattr(ClaimBook, "scan", scan)
    real_create = ClaimBook._create

    def create(self: ClaimBook, name: str, data: bytes) -> None:
        real_create(self, name, data)
        made.append(os.stat(claims_dir / name).st_ctime_ns)

    monkeypatch.setattr(ClaimBook, "_create", create)
    assert book_module.PAST_WAIT_S > 0
    with book_of(claims_dir) as book:
        book.claim([Card("GPU-" + "3" * 32, 3, "GPU 3")], 3600)
    decision_look = looks[1]  # the first look is before writing; the second decides
    assert decision_look > made[0]


def test_a_flooded_directory_is_refused_naming_how_to_see_whose_files(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    flood = (
        "import os, sys\n"
        "for i in range(10_001):\n"
        "    os.close(os.open(os.path.join(sys.argv[1], f'x{i}'), os.O_CREAT | os.O_WRONLY))\n"
    )
    run_as(bob, flood, str(claims_dir))
    refused = gputop_as(ana, claims_dir, "claim", "--gpus", "1")
    assert refused.returncode == 1
    assert "holds more than 10000 entries: someone flooded it" in refused.stderr
    assert f"ls -ln {claims_dir}" in refused.stderr
    picked = gputop_as(ana, claims_dir, "pick", "--format", "index")
    assert "flooded" in picked.stderr
    assert picked.returncode == 1 and "the claims directory cannot be read" in picked.stderr
