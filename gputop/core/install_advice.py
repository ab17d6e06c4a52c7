"""What gputop tells a person to run to put gputop on a server (README, Install).

One place for the words, so every message names the same command: ``gputop hosts install``
copies this gputop's wheel to the host (gputop/core/remote/installer.py). Never ``pip install
gputop``: that name on the package index is another project's.
"""

from __future__ import annotations

import shlex


def install_command(host: str) -> str:
    """``gputop hosts install HOST``, the host quoted as a shell would need it."""
    return shlex.join(["gputop", "hosts", "install", host])


def install_advice(host: str) -> str:
    """The advice for a host without gputop (or with an older one)."""
    # Not "pipx install gputop-dash" on the host: until the name is published there, the index
    # would give nothing, or a stranger's upload (README, Install).
    return f"install gputop there from here: {install_command(host)}"
