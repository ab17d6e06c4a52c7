"""A file that cannot be told is a possible hold of its owner's for no longer than a claim
could last, and possible holds are shown where free or claimed is (docs/claims.md "Files
that cannot be told"). Real second users write the files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers.claims import (
    User,
    as_user,
    book_of,
    claim_name,
    gputop_as,
    holders,
    no_crash,
    plant,
    python_for_users,
    uuids,
)
from helpers.waiting import wait_for

from gputop.core.claims import scan as scan_module
from gputop.core.claims.files import CLOCK_SLACK_S, CONTENT_BYTES, MAX_FOR_S, content
from gputop.core.claims.scan import PENDING_S, Doubt

SITE = (
    "import os\n"
    "if os.environ.get('GPUTOP_TEST_DOUBT_LIFE_S'):\n"
    "    import gputop.core.claims.scan as scan\n"
    "    scan.DOUBT_LIFE_S = float(os.environ['GPUTOP_TEST_DOUBT_LIFE_S'])\n"
)


def short_lived(claims: Path, life_s: float) -> dict[str, str]:
    """The environment for ``gputop_as`` in which a possible hold lasts ``life_s`` (a
    sitecustomize any user can read sets it), so that a test need not wait 7 days."""
    site = claims.parent / "site"
    if not site.exists():
        site.mkdir(mode=0o755)
        (site / "sitecustomize.py").write_text(SITE)
        os.chmod(site / "sitecustomize.py", 0o644)
    _, path = python_for_users()
    return {"PYTHONPATH": f"{site}:{path}", "GPUTOP_TEST_DOUBT_LIFE_S": str(life_s)}


def born(path: Path) -> float:
    from gputop.core.claims.files import stat_file

    directory = os.open(path.parent, os.O_RDONLY)
    try:
        return stat_file(directory, path.name).place_ns / 1e9
    finally:
        os.close(directory)


def test_a_possible_hold_lasts_no_longer_than_the_longest_claim(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    gpu1 = uuids()[1]
    name = claim_name(gpu1, bob, 0x51)
    plant(bob, claims_dir, name, b"[" * CONTENT_BYTES)
    birth = born(claims_dir / name)
    with book_of(claims_dir) as book:
        book.uid = ana.uid
        book.clock = lambda: birth + MAX_FOR_S - 60
        held = book.scan().first(gpu1, ana.uid)
        assert isinstance(held, Doubt) and held.uid == bob.uid
        book.clock = lambda: birth + MAX_FOR_S + CLOCK_SLACK_S + 1
        later = book.scan()
    assert later.first(gpu1, ana.uid) is None
    (odd,) = [s for s in later.suspicious if s.name == name]
    assert "ignored" in odd.reason and "7 days" in odd.reason
    assert scan_module.DOUBT_LIFE_S == MAX_FOR_S + CLOCK_SLACK_S  # as long as a claim, no more
    refused = gputop_as(ana, claims_dir, "claim", "--gpus", "1")  # within its time: held
    assert refused.returncode == 1 and f"may be claimed by {bob.name}" in refused.stderr
    env = short_lived(claims_dir, 0.5)
    wait_for(lambda: time.time() > birth + 0.5, "bob's file to outlive a possible hold")
    claimed = gputop_as(ana, claims_dir, "claim", "--gpus", "1", env=env)
    no_crash(claimed)
    assert claimed.returncode == 0, claimed.stderr
    assert holders(claims_dir) == [(1, ana.name)]
    ran = gputop_as(bob, claims_dir, "run", "--gpus", "1", "--", "true", env=env)
    assert ran.returncode == 1 and f"claimed by {ana.name}" in ran.stderr, ran.stderr


def test_a_flooders_outlived_files_void_no_claim_of_anothers(
    two_users: tuple[User, User], claims_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More than 256 files of bob's, all past a possible hold's time: ignored, and ana's
    claim made before them still holds its card against bob."""
    ana, bob = two_users
    gpu = uuids()
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "2", "--for", "1h").returncode == 0
    flood = (
        "import os, sys\n"
        "for i in range(300):\n"
        "    name = f'{sys.argv[2 + i % 2]}.{os.getuid()}.c{i:016x}.claim'\n"
        "    fd = os.open(os.path.join(sys.argv[1], name), os.O_CREAT | os.O_WRONLY, 0o644)\n"
        "    os.write(fd, b'[' * 1024)\n"
        "    os.close(fd)\n"
    )
    python, _ = python_for_users()
    made = as_user(bob, [python, "-c", flood, str(claims_dir), gpu[2], gpu[3]], {})
    assert made.returncode == 0, made.stderr
    last = max(born(claims_dir / n) for n in os.listdir(claims_dir) if f".{bob.uid}." in n)
    monkeypatch.setattr(scan_module, "DOUBT_LIFE_S", 0.5)
    wait_for(lambda: time.time() > last + 0.5, "bob's files to outlive a possible hold")
    assert holders(claims_dir) == [(2, ana.name)]
    with book_of(claims_dir) as book:
        book.uid = bob.uid
        scan = book.scan()
    assert scan.first(gpu[3], ana.uid) is None and scan.first(gpu[2], bob.uid) is not None
    env = short_lived(claims_dir, 0.5)
    refused = gputop_as(bob, claims_dir, "claim", "--gpus", "2", env=env)
    assert refused.returncode == 1 and f"claimed by {ana.name}" in refused.stderr
    ran = gputop_as(bob, claims_dir, "run", "--gpus", "2", "--", "true", env=env)
    assert ran.returncode == 1 and f"claimed by {ana.name}" in ran.stderr
    free = gputop_as(ana, claims_dir, "claim", "--gpus", "3", env=env)
    assert free.returncode == 0, free.stderr


def test_snapshot_json_claims_json_and_pick_show_a_possible_hold(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    gpu = uuids()
    plant(bob, claims_dir, claim_name(gpu[1], bob, 0x52), b"[" * CONTENT_BYTES)
    plant(
        bob,
        claims_dir,
        claim_name(gpu[3], bob, 0x53),
        content(gpu[3], 3, bob.uid, bob.name, time.time() + 3600, "mine", None),
    )
    birth = born(claims_dir / claim_name(gpu[1], bob, 0x52))
    shown = gputop_as(ana, claims_dir, "snapshot", "--json")
    assert shown.returncode == 0, shown.stderr
    gpus = json.loads(shown.stdout)["gpus"]
    doubt = gpus[1]["claim"]
    assert doubt["user"] == bob.name and doubt["certain"] is False
    assert "cannot be decoded" in doubt["reason"]
    assert abs(doubt["until"] - (birth + MAX_FOR_S + CLOCK_SLACK_S)) < 1  # when it is ignored
    assert {"note", "job"} <= set(doubt)
    assert gpus[3]["claim"]["certain"] is True and gpus[3]["claim"]["reason"] is None
    assert gpus[3]["claim"]["note"] == "mine" and gpus[0]["claim"] is None
    listed = json.loads(gputop_as(ana, claims_dir, "claims", "--json").stdout)
    by_gpu = {entry["gpu"]: entry for entry in listed}
    assert sorted(by_gpu) == [1, 3]
    assert by_gpu[1]["certain"] is False and by_gpu[1]["user"] == bob.name
    assert by_gpu[3]["certain"] is True and by_gpu[3]["note"] == "mine"
    picked = gputop_as(ana, claims_dir, "pick", "-n", "4", "--format", "index")
    assert picked.returncode == 1 and f"GPU 1: may be claimed by {bob.name}" in picked.stderr


async def test_the_dashboards_card_and_launch_dialog_show_a_possible_hold(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    from helpers.dashboard import first_sample, plain_text
    from textual.widgets import Static

    from gputop.tui.screens.launch import LaunchScreen
    from gputop.tui.screenshots import build_app
    from gputop.tui.widgets.gpu_grid import GpuGrid

    _, bob = two_users
    plant(bob, claims_dir, claim_name(uuids()[1], bob, 0x54), b"[" * CONTENT_BYTES)
    app = build_app("v100x4")
    async with app.run_test(size=(200, 48)) as pilot:
        await first_sample(pilot)
        claim = app.snapshot.gpus[1].claim
        assert claim is not None and claim.doubt is not None and claim.user == bob.name
        grid = app.query_one(GpuGrid)
        bottom = grid.card_lines(1)[-1]
        assert bottom.startswith(f"╰─ ? may be claimed by {bob.name} · "), bottom
        assert all("claim" not in grid.card_lines(i)[-1] for i in (0, 2, 3))
        await pilot.press("right", "l")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)
        preview = plain_text(app.screen.query_one("#preview", Static), width=200)
        assert f"GPU 1 may be claimed by {bob.name} (not a claim" in preview, preview


def test_the_lab_protocol_carries_a_possible_hold(fake_backend) -> None:
    """A host's possible hold reaches the lab as one: its card is shown so and not free."""
    from dataclasses import replace

    from gputop.core.claims.view import card_claim_text
    from gputop.core.free_cards import FreePolicy, judge_cards
    from gputop.core.model import GpuClaim
    from gputop.core.remote.protocol import snapshot_from_json
    from gputop.core.snapshot_json import snapshot_to_json

    snapshot = fake_backend("v100x4").sample()
    held = GpuClaim("bob", time.time() + 86400, doubt="its claim file cannot be read (\x1b[2J)")
    gpus = list(snapshot.gpus)
    gpus[1] = replace(gpus[1], claim=held)
    document = json.loads(json.dumps(snapshot_to_json(replace(snapshot, gpus=tuple(gpus)))))
    back = snapshot_from_json(document)
    assert back.gpus[1].claim == held
    said = card_claim_text(back.gpus[1], time.time())
    assert said is not None and said.startswith("? may be claimed by bob · at most 1d")
    assert "\x1b" not in said
    verdicts = {v.physical_index: v for v in judge_cards(back, FreePolicy(), "ana")}
    assert not verdicts[1].free and "may be claimed by bob" in verdicts[1].reasons[0]
    document["gpus"][1]["claim"]["reason"] = 7
    with pytest.raises(Exception, match=r"gpus\[1\]\.claim\.reason"):
        snapshot_from_json(document)


def flood_as(user: User, directory: Path, count: int = 10_001) -> None:
    flood = (
        "import os, sys\n"
        f"for i in range({count}):\n"
        "    os.close(os.open(os.path.join(sys.argv[1], f'x{i}'), os.O_CREAT | os.O_WRONLY))\n"
    )
    python, _ = python_for_users()
    assert as_user(user, [python, "-c", flood, str(directory)], {}).returncode == 0


def unflood_as(user: User, directory: Path, count: int = 10_001) -> None:
    unflood = (
        "import os, sys\n"
        f"for i in range({count}):\n"
        "    os.unlink(os.path.join(sys.argv[1], f'x{i}'))\n"
    )
    python, _ = python_for_users()
    assert as_user(user, [python, "-c", unflood, str(directory)], {}).returncode == 0


def test_a_flood_does_not_let_a_jobs_claim_lapse_and_claims_come_back_after_it(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    """Bob floods the directory while a job of root's holds GPU 0: its renewals, every 10
    minutes, still extend its claim (in place: its birth time keeps its place), so it does
    not end after 30 minutes and hand bob the card once he removes his flood."""
    from gputop.core.claims.book import Card
    from gputop.core.claims.jobs import JobClaim

    ana, bob = two_users
    gpu0 = uuids()[0]
    job = JobClaim(9, {"GPUTOP_CLAIMS_DIR": str(claims_dir)})
    assert job.take([Card(gpu0, 0, "GPU 0")], "train") is None
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "2").returncode == 0
    (name,) = [n for n in os.listdir(claims_dir) if n.startswith(gpu0)]

    def until() -> float:
        return json.loads((claims_dir / name).read_bytes())["until"]

    before = until()
    flood_as(bob, claims_dir)
    assert "flooded" in gputop_as(bob, claims_dir, "claim", "--gpus", "0").stderr
    job._renewed -= 3600  # due
    assert job.renew() is None  # renewed in place
    assert until() > before
    extended = gputop_as(ana, claims_dir, "claim", "--extend", "--for", "6h")
    assert extended.returncode == 0 and "Extended GPU 2" in extended.stdout, extended.stderr
    unflood_as(bob, claims_dir)
    assert holders(claims_dir) == [(0, "root"), (2, ana.name)]  # every claim is back
    taken = gputop_as(bob, claims_dir, "claim", "--gpus", "0")
    assert taken.returncode == 1 and "claimed by root" in taken.stderr, taken.stderr
    job._renewed -= 3600
    assert job.renew() is None
    job.release()
    assert holders(claims_dir) == [(2, ana.name)]


MAKE = {  # what bob makes under a claim's name, by hand
    "symlink": "os.symlink('/etc/passwd', path)",
    "fifo": "os.mkfifo(path, 0o644)",
    "directory": "os.mkdir(path, 0o755)",
    "socket": "s = socket.socket(socket.AF_UNIX); s.bind(path)",
    "empty file": "os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))",
}


KINDS = sorted(MAKE)  # on GPUs 0 to 4 of dgx-h100's eight cards, one kind a card
HERS = 7  # the card ana claims first: one entry of each kind is made behind her claim


@pytest.mark.parametrize("in_her_name", [False, True])
def test_an_entry_named_like_a_claim_is_its_owners_possible_hold_for_a_claims_time(
    two_users: tuple[User, User], claims_dir: Path, in_her_name: bool
) -> None:
    """Bob makes a symlink, FIFO, directory, socket and empty file named like claims (his,
    or in ana's name), each kind on a card of its own: each is bob's possible hold (the
    kernel's owner), never ana's, blocks nobody's earlier claim, ends with a claim's longest
    time, and no reader fails on them."""
    ana, bob = two_users
    gpu = uuids("dgx-h100")
    assert gputop_as(ana, claims_dir, "claim", "--gpus", str(HERS), fake="dgx-h100").returncode == 0
    named = ana if in_her_name else bob
    paths, makers = [], []
    for index, kind in enumerate(KINDS):
        for card, nonce in ((gpu[index], 0x61), (gpu[HERS], 0x62 + index)):
            paths.append(str(claims_dir / claim_name(card, named, nonce)))
            makers.append(f"def make(path):\n    {MAKE[kind]}\n")
    code = "import os, socket, sys\n" + "".join(
        f"{maker}make(sys.argv[{i + 1}])\n" for i, maker in enumerate(makers)
    )
    python, _ = python_for_users()
    made = as_user(bob, [python, "-c", code, *paths], {})
    assert made.returncode == 0, made.stderr
    # every reader of the directory goes through one scan: each once for bob's own names,
    # the scan alone (claims --json, below) for entries in her name
    readers = [["release"]] if in_her_name else [["claims"], ["snapshot", "--json"], ["release"]]
    for argv in readers:
        no_crash(gputop_as(ana, claims_dir, *argv, fake="dgx-h100"))
    # bob's entries on her card were made behind her claim: void, even once she released it
    again = gputop_as(ana, claims_dir, "claim", "--gpus", str(HERS), fake="dgx-h100")
    assert again.returncode == 0, again.stderr
    cards = ",".join(str(i) for i in range(len(KINDS)))
    refused = gputop_as(ana, claims_dir, "claim", "--gpus", cards, fake="dgx-h100")
    assert refused.returncode == 1, refused.stderr
    for index in range(len(KINDS)):  # each kind of entry holds its card
        assert f"GPU {index} may be claimed by {bob.name}" in refused.stderr, refused.stderr
    listed = json.loads(gputop_as(ana, claims_dir, "claims", "--json", fake="dgx-h100").stdout)
    assert sorted((e["gpu"], e["user"], e["certain"]) for e in listed) == [
        *((index, bob.name, False) for index in range(len(KINDS))),
        (HERS, ana.name, True),
    ]
    env = short_lived(claims_dir, 0.5)
    birth = max(born(claims_dir / n) for n in os.listdir(claims_dir))
    # (an empty file is one being written for its first PENDING_S: it stays in line)
    wait_for(lambda: time.time() > birth + PENDING_S, "bob's entries to outlive a possible hold")
    claimed = gputop_as(ana, claims_dir, "claim", "--gpus", cards, env=env, fake="dgx-h100")
    assert claimed.returncode == 0, claimed.stderr
    assert holders(claims_dir) == [*((i, ana.name) for i in range(len(KINDS))), (HERS, ana.name)]


def test_a_file_cannot_be_renamed_over_another_users_claim(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    gpu1 = uuids()[1]
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "1").returncode == 0
    (hers,) = os.listdir(claims_dir)
    mine = claim_name(gpu1, bob, 0x63)
    plant(bob, claims_dir, mine, content(gpu1, 1, bob.uid, bob.name, time.time() + 60, "", None))
    code = "import os, sys\nos.rename(sys.argv[1], sys.argv[2])\n"
    python, _ = python_for_users()
    moved = as_user(bob, [python, "-c", code, str(claims_dir / mine), str(claims_dir / hers)], {})
    assert moved.returncode != 0 and "PermissionError" in moved.stderr  # the sticky bit
    assert holders(claims_dir) == [(1, ana.name)]
