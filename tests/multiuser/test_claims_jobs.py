"""gputop's jobs and claims (docs/claims.md, "Jobs"): a job holds a claim on its cards while
it runs and gives it back when it ends; a job that waits for its cards waits for another
user's claim to end. Real supervisors, simulated cards, a real second user."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.claims import User, gputop_as
from helpers.jobs import PYTHON, wait_until_ended, wait_until_running, wait_until_waiting
from helpers.waiting import wait_for

from gputop.cli.main import main
from gputop.core.claims.book import ClaimBook


def live_claims(directory: Path) -> list[tuple[int, str, int | None]]:
    book = ClaimBook.open({"GPUTOP_CLAIMS_DIR": str(directory)})
    assert book is not None
    with book:
        return sorted((c.gpu, c.user, c.job) for c in book.scan().holders().values())


def until_file(flag: Path) -> list[str]:
    """A job that runs until ``flag`` exists."""
    code = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)"
    return [PYTHON, "-c", code, str(flag)]


def launched_id(out: str) -> int:
    return int(out.split("Job ", 1)[1].split(" ", 1)[0])


def test_a_job_holds_a_claim_on_its_cards_while_it_runs(
    state_dir: Path, claims_dir: Path, tmp_path: Path, capsys
) -> None:
    flag = tmp_path / "done"
    assert main(["--fake", "v100x4", "run", "--gpus", "3,2", "--", *until_file(flag)]) == 0
    job_id = launched_id(capsys.readouterr().out)
    wait_until_running(state_dir, job_id)
    held = wait_for(lambda: live_claims(claims_dir), "the job's claim")
    assert held == [(2, "root", job_id), (3, "root", job_id)]
    flag.touch()
    ended = wait_until_ended(state_dir, job_id)
    assert ended.status == "exited"
    assert live_claims(claims_dir) == []
    assert os.listdir(claims_dir) == []


def test_a_waiting_job_waits_for_another_users_claim_to_end(
    state_dir: Path, claims_dir: Path, tmp_path: Path, two_users: tuple[User, User], capsys
) -> None:
    ana, _ = two_users
    claimed = gputop_as(ana, claims_dir, "claim", "--gpus", "2", "--note", "eval")
    assert claimed.returncode == 0, claimed.stderr
    flag = tmp_path / "done"
    argv = ["--fake", "v100x4", "run", "--wait", "--gpus", "2", "--", *until_file(flag)]
    assert main(argv) == 0
    job_id = launched_id(capsys.readouterr().out)
    waiting = wait_until_waiting(state_dir, job_id)
    assert f"GPU 2: claimed by {ana.name} until" in (waiting.note or "")
    assert gputop_as(ana, claims_dir, "release").returncode == 0
    wait_until_running(state_dir, job_id)
    assert wait_for(lambda: live_claims(claims_dir), "the job's claim") == [(2, "root", job_id)]
    taken = gputop_as(ana, claims_dir, "claim", "--gpus", "2")
    assert taken.returncode == 1
    assert "GPU 2 is claimed by root" in taken.stderr
    listed = gputop_as(ana, claims_dir, "claims")
    assert f"job {job_id}" in listed.stdout
    flag.touch()
    wait_until_ended(state_dir, job_id)
    assert live_claims(claims_dir) == []


def test_a_job_whose_card_another_user_claimed_meanwhile_does_not_start(
    state_dir: Path, claims_dir: Path, tmp_path: Path, two_users: tuple[User, User]
) -> None:
    """Launched past the check ``gputop run`` and the dashboard make (a claim taken between
    the check and the start): the supervisor's claim is refused, and the job never runs."""
    from helpers.jobs import launch

    ana, _ = two_users
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "1").returncode == 0
    flag = tmp_path / "ran"
    job = launch(state_dir, [PYTHON, "-c", f"open({str(flag)!r}, 'w').close()"], gpus=(1,))
    ended = wait_until_ended(state_dir, job.id)
    assert ended.status_text == "failed 1"
    assert (
        f"its cards were claimed meanwhile: Nothing was claimed: GPU 1 is claimed by {ana.name}"
        in (ended.note or "")
    )
    assert not flag.exists()
    assert live_claims(claims_dir) == [(1, ana.name, None)]
