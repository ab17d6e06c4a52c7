"""Claims between two real users sharing one sticky directory (docs/claims.md)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers.claims import User, as_user, ended_job, gputop_as, python_for_users

from gputop.core.claims.files import CONTENT_BYTES, content


def claims_json(user: User, directory: Path) -> list[dict]:
    listed = gputop_as(user, directory, "claims", "--json")
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def test_a_claim_is_refused_to_the_other_user_naming_who_and_until_when(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    made = gputop_as(ana, claims_dir, "claim", "--gpus", "1", "--for", "2h", "--note", "sweep")
    assert made.returncode == 0, made.stderr
    refused = gputop_as(bob, claims_dir, "claim", "--gpus", "1")
    assert refused.returncode == 1
    assert f"GPU 1 is claimed by {ana.name} until " in refused.stderr
    assert "(2h left)" in refused.stderr
    listed = claims_json(bob, claims_dir)
    assert [(c["gpu"], c["user"], c["note"], c["job"]) for c in listed] == [
        (1, ana.name, "sweep", None)
    ]
    assert 7100 < listed[0]["until"] - time.time() < 7201
    (name,) = os.listdir(claims_dir)
    info = os.stat(claims_dir / name)
    assert info.st_uid == ana.uid
    assert oct(info.st_mode & 0o777) == oct(0o644)


def test_a_claim_of_several_cards_is_all_or_nothing(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "2").returncode == 0
    refused = gputop_as(bob, claims_dir, "claim", "--gpus", "0,1,2")
    assert refused.returncode == 1
    assert "Nothing was claimed" in refused.stderr
    assert [c["user"] for c in claims_json(bob, claims_dir)] == [ana.name]
    assert all(os.stat(claims_dir / n).st_uid == ana.uid for n in os.listdir(claims_dir))
    assert gputop_as(bob, claims_dir, "claim", "--gpus", "0,1").returncode == 0
    held = {c["gpu"]: c["user"] for c in claims_json(ana, claims_dir)}
    assert held == {0: bob.name, 1: bob.name, 2: ana.name}


def test_release_of_another_users_claim_is_refused(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "0,3").returncode == 0
    refused = gputop_as(bob, claims_dir, "release", "--gpus", "0")
    assert refused.returncode == 1
    assert f"GPU 0 is claimed by {ana.name}, not you" in refused.stderr
    mine = gputop_as(bob, claims_dir, "release")  # all of bob's: none
    assert mine.returncode == 0 and "You held no claim" in mine.stdout
    assert len(claims_json(bob, claims_dir)) == 2
    released = gputop_as(ana, claims_dir, "release", "--gpus", "3")
    assert released.returncode == 0 and "Released GPU 3" in released.stdout
    assert [c["gpu"] for c in claims_json(bob, claims_dir)] == [0]
    assert gputop_as(ana, claims_dir, "release").returncode == 0
    assert claims_json(bob, claims_dir) == []


def test_pick_skips_a_card_another_user_claimed(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    # v100x4 at t=30: GPUs 2 and 3 are the free ones
    before = gputop_as(bob, claims_dir, "pick", "-n", "2", "--format", "index")
    assert before.returncode == 0, before.stderr
    assert before.stdout.strip() == "2,3"
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "3").returncode == 0
    after = gputop_as(bob, claims_dir, "pick", "-n", "2", "--format", "index")
    assert after.returncode == 1
    assert f"GPU 3: claimed by {ana.name} until" in after.stderr
    own = gputop_as(ana, claims_dir, "pick", "-n", "2", "--format", "index")
    assert own.stdout.strip() == "2,3"  # her own claim does not keep her off
    picked = gputop_as(bob, claims_dir, "claim", "-n", "1")
    assert picked.returncode == 0, picked.stderr
    assert "Claimed GPU 2 " in picked.stdout
    none_left = gputop_as(bob, claims_dir, "claim", "-n", "1")
    assert none_left.returncode == 1
    assert "GPU 2: already claimed by you" in none_left.stderr
    assert f"GPU 3: claimed by {ana.name}" in none_left.stderr


def test_run_refuses_a_card_another_user_claimed_unless_told_to_ignore_claims(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "2", "--note", "mine").returncode == 0
    refused = gputop_as(bob, claims_dir, "run", "--gpus", "2", "--", "true")
    assert refused.returncode == 1
    assert f"GPU 2 is claimed by {ana.name} until" in refused.stderr
    assert "--ignore-claims" in refused.stderr
    assert not (claims_dir.parent / f"state-{bob.name}" / "jobs.sqlite3").exists()
    forced = gputop_as(
        bob, claims_dir, "run", "--gpus", "2", "--ignore-claims", "--json", "--", "true"
    )
    assert forced.returncode == 0, forced.stderr
    assert f"GPU 2 is claimed by {ana.name}" in forced.stderr
    assert json.loads(forced.stdout)["env"]["GPUTOP_IGNORED_CLAIMS"] == f"GPU 2 ({ana.name})"
    job = ended_job(bob, claims_dir)  # it runs, though ana holds the card, and claims nothing
    assert job["status_text"] == "exited 0", job
    assert [c["user"] for c in claims_json(bob, claims_dir)] == [ana.name]


def test_a_forged_file_is_no_claim_is_shown_to_root_and_is_its_owners_possible_hold(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    python, path = python_for_users()
    listed = gputop_as(bob, claims_dir, "snapshot", "--json")
    uuid = json.loads(listed.stdout)["gpus"][2]["uuid"]
    forgeries = {
        # bob writes a claim in ana's name, under her uid in the file name
        f"{uuid}.{ana.uid}.c00000000000000aa.claim": content(
            uuid, 2, ana.uid, ana.name, time.time() + 3600, "", None
        ),
        # bob's own file, but its content names ana
        f"{uuid}.{bob.uid}.c00000000000000bb.claim": content(
            uuid, 2, ana.uid, ana.name, time.time() + 3600, "", None
        ),
        # bob's own, for a year
        f"{uuid}.{bob.uid}.c00000000000000cc.claim": content(
            uuid, 2, bob.uid, bob.name, time.time() + 365 * 86400, "", None
        ),
    }
    for name, data in forgeries.items():
        script = (
            "import os,sys; fd=os.open(sys.argv[1], os.O_WRONLY|os.O_CREAT|os.O_EXCL, 0o644); "
            "os.write(fd, bytes.fromhex(sys.argv[2])); os.close(fd)"
        )
        wrote = as_user(bob, [python, "-c", script, str(claims_dir / name), data.hex()], {})
        assert wrote.returncode == 0, wrote.stderr
        assert len(data) == CONTENT_BYTES
    # no claim is believed: the card is listed as bob's possible hold (certain false)
    listed = [(c["gpu"], c["user"], c["certain"]) for c in claims_json(ana, claims_dir)]
    assert listed == [(2, bob.name, False)]
    # none is believed, and each is bob's (the kernel's word) possible hold: a file of his
    # gputop cannot tell keeps the card from others, as a claim of his own could
    held = gputop_as(ana, claims_dir, "claim", "--gpus", "2")
    assert held.returncode == 1 and f"GPU 2 may be claimed by {bob.name}" in held.stderr
    assert [c["certain"] for c in claims_json(bob, claims_dir)] == [False]
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "1").returncode == 0
    as_root = subprocess.run(
        [python, "-m", "gputop", "--fake", "v100x4", "claims"],
        env={**os.environ, "PYTHONPATH": path, "GPUTOP_CLAIMS_DIR": str(claims_dir)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "no believable claim" in as_root.stderr
    assert f"its name says uid {ana.uid}, but it belongs to uid {bob.uid}" in as_root.stderr
    assert f"it names uid {ana.uid}, but belongs to uid {bob.uid}" in as_root.stderr
    assert "more than 7 days after it was written" in as_root.stderr


def test_an_expired_claim_holds_nothing_and_its_owners_next_gputop_removes_it(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    listed = gputop_as(bob, claims_dir, "snapshot", "--json")
    uuid = json.loads(listed.stdout)["gpus"][0]["uuid"]
    python, _ = python_for_users()
    name = f"{uuid}.{ana.uid}.c00000000000000dd.claim"
    data = content(uuid, 0, ana.uid, ana.name, time.time() - 5, "", None)
    script = (
        "import os,sys; fd=os.open(sys.argv[1], os.O_WRONLY|os.O_CREAT|os.O_EXCL, 0o644); "
        "os.write(fd, bytes.fromhex(sys.argv[2])); os.close(fd)"
    )
    assert (
        as_user(ana, [python, "-c", script, str(claims_dir / name), data.hex()], {}).returncode == 0
    )
    assert claims_json(bob, claims_dir) == []
    assert (claims_dir / name).exists()  # bob cannot remove it, and does not try
    assert gputop_as(bob, claims_dir, "claim", "--gpus", "0").returncode == 0
    assert gputop_as(ana, claims_dir, "claims").returncode == 0
    assert not (claims_dir / name).exists()


@pytest.mark.parametrize(
    ("mode", "owner", "said"),
    [
        (0o777, 0, "writable by other users without the sticky bit (mode 0777)"),
        (0o1777, "ana", "not root"),
    ],
)
def test_an_unsafe_directory_is_refused_with_the_command_that_fixes_it(
    two_users: tuple[User, User], claims_dir: Path, mode: int, owner: int | str, said: str
) -> None:
    ana, bob = two_users
    os.chmod(claims_dir, mode)
    if owner == "ana":
        os.chown(claims_dir, ana.uid, ana.gid)
    refused = gputop_as(bob, claims_dir, "claim", "--gpus", "0")
    assert refused.returncode == 1
    assert said in refused.stderr
    assert "gputop claims --setup" in refused.stderr
    assert f"install -d -m 1777 -o root -g root {claims_dir}" in refused.stderr
    assert os.listdir(claims_dir) == []
    picked = gputop_as(bob, claims_dir, "pick", "--format", "index")
    assert picked.returncode == 0  # gputop still works, and says why claims are not used
    assert said in picked.stderr


def test_without_the_directory_gputop_works_and_says_claims_are_not_set_up(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    _, bob = two_users
    missing = claims_dir / "nowhere"
    refused = gputop_as(bob, missing, "claim", "--gpus", "0")
    assert refused.returncode == 1
    assert "Claims are not set up here" in refused.stderr
    assert gputop_as(bob, missing, "pick").returncode == 0
    listed = gputop_as(bob, missing, "claims", "--json")
    assert (listed.returncode, listed.stdout) == (0, "[]\n")
    assert "claims are not set up here" in listed.stderr
    assert not missing.exists()


def test_setup_makes_the_directory_as_root_and_only_as_root(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    _, bob = two_users
    target = claims_dir.parent / "var" / "claims"
    python, path = python_for_users()
    env = {**os.environ, "PYTHONPATH": path, "GPUTOP_CLAIMS_DIR": str(target)}
    denied = gputop_as(bob, target, "claims", "--setup")
    assert denied.returncode == 1 and "Only root" in denied.stderr
    made = subprocess.run(
        [python, "-m", "gputop", "claims", "--setup"], env=env, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    info = os.stat(target)
    assert (info.st_uid, oct(info.st_mode & 0o7777)) == (0, oct(0o1777))
    assert gputop_as(bob, target, "claim", "--gpus", "1").returncode == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["claim", "--gpus", "0", "--for", "30s"],
        ["claim", "--gpus", "0", "--for", "8d"],
        ["claim", "--gpus", "0", "--for", "nan"],
        ["claim", "--gpus", "0", "--for", "99999999999999999999d"],
        ["claim", "--gpus", "0", "--note", "x" * 201],
        ["claim", "-n", "0"],
        ["claim"],
        ["claim", "--extend", "--note", "x"],
        ["claim", "--extend", "-n", "1"],
        ["claim", "--gpus", "9"],
    ],
)
def test_bad_input_is_a_usage_error(claims_dir: Path, argv: list[str]) -> None:
    from gputop.cli.main import main

    with pytest.raises(SystemExit) as exited:
        code = main(["--fake", "v100x4", *argv])
        raise SystemExit(code)
    assert exited.value.code == 2
    assert os.listdir(claims_dir) == []


RACE_SCRIPT = """
import os, sys, time
from gputop.cli import claim_command, main
from gputop.core.claims.book import ClaimBook
import gputop.core.jobs.launch
# Sampled before the start, so that every claimer reaches the claims directory at once.
snapshot = claim_command.sample("v100x4")
claim_command.sample = lambda fake: snapshot
go = os.environ["GO_FILE"]

def wait_for_go():
    while not os.path.exists(go):
        time.sleep(0.0005)

if os.environ["BARRIER"] == "create":
    # the worst case: every claimer has passed the first look, then all write at once
    create = ClaimBook._create
    def _create(self, name, data):
        print("ready", flush=True)
        wait_for_go()
        return create(self, name, data)
    ClaimBook._create = _create
else:
    print("ready", flush=True)
    wait_for_go()
sys.exit(main.main(["--fake", "v100x4", "claim", "--gpus", "1", "--for", "1h"]))
"""


@pytest.mark.parametrize(("barrier", "rounds"), [("start", 2), ("create", 3)])
def test_a_race_of_many_claimers_of_both_users_has_exactly_one_winner(
    two_users: tuple[User, User], claims_dir: Path, barrier: str, rounds: int
) -> None:
    python, path = python_for_users()
    per_user = 3
    deadline = time.monotonic() + 180
    winners: list[str] = []
    raced = 0  # losers that got past the first look and lost by the order rule
    for round_number in range(rounds):
        assert time.monotonic() < deadline, "the race rounds took too long"
        go = claims_dir.parent / f"go-{barrier}-{round_number}"
        env = {
            "PYTHONPATH": path,
            "GPUTOP_CLAIMS_DIR": str(claims_dir),
            "GPUTOP_FAKE_TIME": "30",
            "GO_FILE": str(go),
            "BARRIER": barrier,
            "PATH": "/usr/bin:/bin",
        }
        processes = [
            (
                user,
                subprocess.Popen(
                    [python, "-c", RACE_SCRIPT],
                    user=user.uid,
                    group=user.gid,
                    extra_groups=[],
                    cwd="/",
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
            for _ in range(per_user)
            for user in two_users
        ]
        for _, process in processes:
            assert process.stdout is not None
            assert process.stdout.readline() == "ready\n"
        go.touch()
        results = [
            (user, process.communicate(timeout=120), process.returncode)
            for user, process in processes
        ]
        won = [user for user, _, code in results if code == 0]
        assert len(won) == 1, [(u.name, out, code) for u, out, code in results]
        for _, (_, err), code in results:
            # lost by the order rule: to a complete claim before its own, or to another
            # user's file before it still being written (a possible earlier claim)
            raced += "won the race" in err or "came first" in err or " first (" in err
            if code != 0:
                assert code == 1, err
                assert "Nothing was claimed" in err, err
        files = os.listdir(claims_dir)
        assert len(files) == 1, files  # every loser removed its file
        assert os.stat(claims_dir / files[0]).st_uid == won[0].uid
        winners.append(won[0].name)
        os.unlink(claims_dir / files[0])
    losers = rounds * (2 * per_user - 1)
    print(f"{barrier}: {raced} of {losers} losers lost by the order rule; winners {winners}")
    if barrier == "create":
        assert raced == losers  # none could have been refused at the first look
