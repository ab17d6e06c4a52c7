"""gputop: a terminal dashboard for NVIDIA GPUs."""

__version__ = "0.1.0"
