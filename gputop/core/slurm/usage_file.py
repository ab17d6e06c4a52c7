"""What a Slurm job used, as its node's wrapper reports it: a private file beside Slurm's
output in the job store's logs directory (docs/slurm.md, "What a Slurm job used").

The wrapper (usage_wrapper.py) renames a whole new ``slurm-<id>.usage.json`` over the old
after each sample. The submitting side reads it like any file from outside: through the
checked logs directory, never through a link, a regular file of the user's own of at most
``MAX_REPORT_BYTES``, every number range-checked (usage.py); else "not measured", with why.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from gputop.core.jobs.usage import JobUsage, not_measured_text, usage_from_json
from gputop.core.numbers import strict_json
from gputop.core.private_files import (
    PRIVATE_FILE_MODE,
    StoreError,
    open_private_dir,
    open_private_file,
)

REPORT_FORMAT = 1
MAX_REPORT_BYTES = 256 * 1024
NOT_DELIVERED = (
    "not measured: the node sent no usage report (it cannot run the gputop that submitted "
    "the job, or cannot write the job store's logs directory: docs/slurm.md)"
)


def report_name(slurm_job_id: int) -> str:
    return f"slurm-{slurm_job_id}.usage.json"


def write_report(
    logs_dir: Path,
    slurm_job_id: int,
    node: str,
    usage: JobUsage | None = None,
    not_measured: str | None = None,
) -> None:
    """Replace the job's report with ``usage``, or with why it is ``not_measured``.

    Raises ``OSError`` or ``StoreError`` when the directory cannot be written or is not
    the user's own (the wrapper then measures on and reports nothing)."""
    body: dict[str, Any] = {"format": REPORT_FORMAT, "slurm_job_id": slurm_job_id, "node": node}
    if usage is not None:
        body["usage"] = usage.to_json()
    else:
        body["not_measured"] = not_measured or "not measured"
    data = strict_json(body).encode()
    dir_fd = open_private_dir(logs_dir, create=False)
    try:
        temporary = f".{report_name(slurm_job_id)}.{secrets.token_hex(6)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, PRIVATE_FILE_MODE, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.rename(temporary, report_name(slurm_job_id), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)


def read_report(logs_dir: Path, slurm_job_id: int) -> str | None:
    """The job's report as the store keeps it (usage.py's stored form, or a not-measured
    record with the reason); ``None`` when the node has written none (yet)."""
    name = report_name(slurm_job_id)
    try:
        dir_fd = open_private_dir(logs_dir, create=False)
    except StoreError:
        return None
    try:
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        try:
            fd = open_private_file(dir_fd, logs_dir, name, os.O_RDONLY, "Slurm usage report")
        except StoreError as error:
            return not_measured_text(f"not measured: the usage report was refused: {error}")
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_REPORT_BYTES + 1)
    except OSError as error:
        return not_measured_text(f"not measured: the usage report cannot be read: {error}")
    finally:
        os.close(dir_fd)
    return _stored_form(data, slurm_job_id)


def remove_report(logs_dir: Path, slurm_job_id: int) -> None:
    """Remove the report once the ended job's row holds it (nothing is said if it cannot)."""
    with contextlib.suppress(OSError, StoreError):
        dir_fd = open_private_dir(logs_dir, create=False)
        try:
            os.unlink(report_name(slurm_job_id), dir_fd=dir_fd)
        finally:
            os.close(dir_fd)


def _stored_form(data: bytes, slurm_job_id: int) -> str:
    broken = not_measured_text("not measured: the node's usage report is not a valid report")
    if len(data) > MAX_REPORT_BYTES:
        return broken
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        return broken
    if not isinstance(body, dict) or body.get("format") != REPORT_FORMAT:
        return broken
    if body.get("slurm_job_id") != slurm_job_id:
        return broken
    reason = body.get("not_measured")
    if isinstance(reason, str):
        return not_measured_text(reason)  # cleaned where it is read back (usage.py)
    usage = usage_from_json(body.get("usage"))
    return usage.to_text() if usage is not None else broken
