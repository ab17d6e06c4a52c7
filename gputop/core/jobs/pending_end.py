"""The reserved file's former module name (now unrecorded.py), for store_salvage.py."""

from gputop.core.jobs.unrecorded import read_pending_ends

__all__ = ["read_pending_ends"]
