"""On a node: which Slurm job holds which GPU here (docs/slurm.md).

Slurm names nodes its own way (``NodeName``), not always the host name: the node is
``$SLURMD_NODENAME`` where set, else the node whose ``NodeHostName`` is this host
(``sinfo -N -o %N|%n``), else the host name. A job's ``gres_detail`` has one entry per node
of its node list, in order; its ``IDX`` number the node's GPUs in the order of its
``gres.conf`` (``/dev/nvidia0`` first): NVML's physical index wherever the device minor
numbers follow the PCI bus order, as they do on usual nodes and with ``AutoDetect=nvml``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping, Sequence

from gputop.core.records import frozen
from gputop.core.slurm.commands import SlurmError, run_slurm
from gputop.core.slurm.queue import SlurmJob, parse_gpu_indices


@frozen
class CardHolder:
    """The Slurm job that holds one GPU of this node."""

    physical_index: int
    job: SlurmJob


def this_node(environ: Mapping[str, str] | None = None) -> str:
    """This machine's Slurm node name."""
    env = os.environ if environ is None else environ
    named = env.get("SLURMD_NODENAME")
    if named:
        return named
    host = socket.gethostname()
    try:
        listing = run_slurm(["sinfo", "-h", "-N", "-o", "%N|%n"], env).stdout
    except SlurmError:
        return host.split(".")[0]
    return node_for_host(listing, host)


def node_for_host(sinfo_listing: str, host: str) -> str:
    """From ``sinfo -N -o %N|%n`` lines: the node whose host name is ``host``."""
    short = host.split(".")[0]
    for line in sinfo_listing.splitlines():
        node, _, node_host = line.strip().partition("|")
        if node and node_host.split(".")[0] == short:
            return node
    return short


def expand_nodes(nodes: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """``node[1-3],gpu7`` → its node names; Slurm expands it (``scontrol show hostnames``)."""
    if not nodes:
        return []
    if "[" not in nodes and "," not in nodes:
        return [nodes]
    return run_slurm(["scontrol", "show", "hostnames", nodes], environ).stdout.split()


def gpus_on_node(job: SlurmJob, node: str, node_names: Sequence[str]) -> tuple[int, ...]:
    """The physical GPU indices ``job`` holds on ``node`` (``node_names``: its expanded list)."""
    if node not in node_names:
        return ()
    position = node_names.index(node)
    if len(job.gres_detail) == len(node_names):
        return parse_gpu_indices([job.gres_detail[position]])
    if len(node_names) == 1:
        return job.gpu_indices
    return ()  # Slurm reported per-node detail we cannot pair with its nodes


def card_holders(
    jobs: Iterable[SlurmJob], node: str, environ: Mapping[str, str] | None = None
) -> dict[int, CardHolder]:
    """Physical GPU index on ``node`` → the running Slurm job holding it."""
    holders: dict[int, CardHolder] = {}
    for job in jobs:
        if job.state != "RUNNING" or not job.gres_detail:
            continue
        try:
            names = expand_nodes(job.nodes, environ)
        except SlurmError:
            continue
        for index in gpus_on_node(job, node, names):
            holders[index] = CardHolder(index, job)
    return holders
