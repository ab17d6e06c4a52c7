"""Submit through ``sbatch`` and record the job: for ``gputop run --slurm`` and the launch
dialog alike (docs/slurm.md). A submission Slurm refuses records nothing; a job Slurm
accepted but gputop could not record is cancelled again, so none runs unseen."""

from __future__ import annotations

from collections.abc import Mapping

from gputop.core.jobs.model import Job
from gputop.core.jobs.store import JobStore
from gputop.core.slurm.commands import SlurmError
from gputop.core.slurm.job_rows import record_slurm_job
from gputop.core.slurm.submit import SlurmRequest, cancel, output_path, submit


class UnrecordedSlurmJob(SlurmError):
    """Slurm accepted the job, gputop could not record it, and scancel failed too."""


def submit_and_record(
    store: JobStore,
    request: SlurmRequest,
    command_text: str,
    environ: Mapping[str, str] | None = None,
) -> Job:
    slurm_job_id = submit(request, store.state_dir, store.logs_dir, environ)
    try:
        job = record_slurm_job(
            store,
            slurm_job_id=slurm_job_id,
            name=request.name,
            command=request.argv,
            command_text=command_text,
            cwd=request.cwd,
            log_path=output_path(store.logs_dir, slurm_job_id),
        )
    except BaseException:
        try:
            cancel(slurm_job_id, environ)
        except SlurmError as error:
            raise UnrecordedSlurmJob(
                f"Slurm job {slurm_job_id} was submitted but gputop could not record it, and "
                f"scancel failed: {error}"
            ) from None
        raise
    store.add_history(command_text)
    return job
