"""Waiting for free cards (policy.py): the supervisor's decision, one poll at a time.

Only *running* gputop jobs hold a card here: counting waiting ones would make two jobs
waiting for one card wait for each other for ever. Of two jobs that see a card free at the
same poll, the store lets only the first claim it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gputop.core import settings
from gputop.core.claims.jobs import IGNORED_ENV
from gputop.core.claims.view import read_claims
from gputop.core.errors import GputopError
from gputop.core.free_cards import FreePolicy, NotEnoughFreeGpus, judge_cards, pick_free
from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_rows import cards_set
from gputop.core.mig_targets import judge_mig_instance, mig_target_by_uuid, pinned_targets
from gputop.core.records import frozen
from gputop.core.users import current_user

if TYPE_CHECKING:
    from gputop.core.model import Snapshot
    from gputop.core.sampling.nvml_backend import NvmlBackend


@frozen(slots=False)
class WaitDecision:
    ready: bool
    physical_indices: tuple[int, ...]
    """The cards to start on (for an ``--auto`` job: the ones chosen now)."""
    reason: str
    """Why it must wait, for a person ("" when ready)."""


def wait_decision(
    snapshot: Snapshot,
    job: Job,
    policy: FreePolicy,
    user: str,
    running_job_gpus: Mapping[int, Sequence[int]],
    running_job_uuids: Mapping[int, Sequence[str]] | None = None,
    claimed: Mapping[int, str] | None = None,
    claimed_instances: Mapping[str, str] | None = None,
) -> WaitDecision:
    """May the job start now, and on which cards? ``running_job_uuids``: so a MIG instance
    another job is pinned to is taken; ``claimed``, ``claimed_instances``: why cards and MIG
    instances another user claimed are not free (docs/claims.md)."""
    claimed = claimed or {}
    claimed_instances = claimed_instances or {}
    if job.wait_count is not None and not job.physical_indices:
        try:
            chosen = pick_free(
                snapshot, job.wait_count, policy, user, running_job_gpus, claimed=claimed
            )
        except NotEnoughFreeGpus as error:
            return WaitDecision(False, (), str(error).splitlines()[0])
        return WaitDecision(True, tuple(chosen), "")
    verdicts = {
        v.physical_index: v for v in judge_cards(snapshot, policy, user, running_job_gpus, claimed)
    }
    problems = []
    for target in pinned_targets(job.physical_indices, job.uuids):
        if isinstance(target, int):
            verdict = verdicts.get(target)
            if verdict is None:
                problems.append(f"GPU {target} is not on this machine")
            elif not verdict.free:
                problems.append(f"GPU {target}: {', '.join(verdict.reasons)}")
            continue
        instance = mig_target_by_uuid(snapshot.gpus, target)
        if instance is None:
            problems.append(f"MIG device {target} is not on this machine")
        elif target in claimed_instances:
            problems.append(f"{instance.label}: {claimed_instances[target]}")
        else:
            holders = [i for i, u in (running_job_uuids or {}).items() if target in u]
            mig = judge_mig_instance(instance, policy.min_free_bytes, user, holders)
            if not mig.free:
                problems.append(f"{instance.label}: {', '.join(mig.reasons)}")
    return WaitDecision(not problems, job.physical_indices, "; ".join(problems))


def job_policy(job: Job) -> FreePolicy:
    """The policy the job was queued with (``--min-free-mib``, ``--max-util``)."""
    given = {"min_free_mib": job.wait_min_free_mib, "max_util_percent": job.wait_max_util_percent}
    return FreePolicy(**{name: value for name, value in given.items() if value is not None})


class CardWaiter:
    """Polls the GPUs (real, or simulated) for one waiting job."""

    def __init__(self, store: JobStore, environ: Mapping[str, str]) -> None:
        self.store = store
        self.environ = environ
        # gputop run refuses a bad value; a supervisor still meeting one uses the default
        self.poll_s = settings.WAIT_POLL.or_default(environ)
        self._user = current_user()
        self._backend: NvmlBackend | None = None

    def try_start(self, job: Job) -> tuple[Job | None, str]:
        """``(the job, claimed and ready to run, "")`` or ``(None, why it still waits)``."""
        from gputop.core.sampling.source import open_backend
        from gputop.core.visibility import pin_environment

        try:
            if self._backend is None:
                self._backend = open_backend(environ=self.environ)
            snapshot = self._backend.sample()
        except GputopError as error:
            return None, f"cannot read the GPUs: {error}"
        others = [
            other
            for other in self.store.active_jobs()
            if other.id != job.id and other.state is JobState.RUNNING
        ]
        running = {other.id: other.physical_indices for other in others}
        running_uuids = {other.id: other.uuids for other in others}
        claimed, instances = self._claims(snapshot, job)
        policy = job_policy(job)
        decision = wait_decision(
            snapshot, job, policy, self._user, running, running_uuids, claimed, instances
        )
        if not decision.ready:
            return None, decision.reason
        if not job.physical_indices:
            pinning = pin_environment(
                snapshot.gpus,
                list(decision.physical_indices),
                driver_version=snapshot.driver_version,
            )
            chosen = cards_set(
                [device.physical_index for device in pinning.devices],
                [device.uuid or "" for device in pinning.devices],
                {**pinning.env, **_ignored_mark(job)},
            )
            self.store.record(job.id, chosen)
        holder = self.store.claim_cards(job.id)
        if holder is not None:
            return None, f"job {holder.id} ({holder.name}) has just taken a card"
        return self.store.get(job.id), ""

    def _claims(self, snapshot: Snapshot, job: Job) -> tuple[dict[int, str], dict[str, str]]:
        """Cards and instances other users' claims keep this job off (docs/claims.md)."""
        if _ignored_mark(job):
            return {}, {}
        view = read_claims(self.environ)
        return view.blocked_cards(snapshot), view.blocked_instances(snapshot)

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


def _ignored_mark(job: Job) -> dict[str, str]:
    """The ``--ignore-claims`` mark of a job, kept when its cards are fixed."""
    return {IGNORED_ENV: job.env[IGNORED_ENV]} if IGNORED_ENV in job.env else {}
