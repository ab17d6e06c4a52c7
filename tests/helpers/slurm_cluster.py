"""A real one-node Slurm cluster on localhost for the Slurm tests (docs/slurm.md).

Debian's ``slurmctld``, ``slurmd`` and ``munge`` (installed by ``.ci/run``), started in a
temporary directory: munged with a generated key and its own socket, a generated
``slurm.conf`` (select/cons_tres, proctrack/linuxproc, task/none, no cgroups, no
accounting) on free ports, and a ``gres.conf`` giving the node four GPUs whose device
files are character devices made with ``mknod`` (major 195, as NVIDIA's; nothing backs
them: no job opens them, Slurm only needs them to exist and to number the cards). Every
Slurm command finds the cluster through ``SLURM_CONF``.

The daemons run as root (``SlurmUser=root``): slurmd must be root to start jobs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gputop.core.jobs.launchers import free_port  # one helper for every test
from helpers.real_components import cannot

GPU_COUNT = 4
NODE_NAME = "gputopnode"
CPUS = 8
"""More than a small machine has (``SlurmdParameters=config_overrides``): five 1-GPU jobs
must be limited by GPUs, never by CPUs."""
START_DEADLINE_S = 30.0
PROGRAMS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


def _program(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None
    )


@dataclass
class SlurmCluster:
    directory: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.directory / "slurm.conf"

    @property
    def device_dir(self) -> Path:
        return self.directory / "dev"

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def command(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), env=self.env(), capture_output=True, text=True, timeout=30, check=check
        )

    def logs(self) -> str:
        """The daemons' own words, for a failure message."""
        parts = []
        for name in ("munged.out", "slurmctld.out", "slurmd.out"):
            path = self.directory / name
            if path.exists():
                parts.append(f"--- {name}\n" + path.read_text(errors="replace")[-1500:])
        return "\n".join(parts)

    def cancel_everything(self) -> None:
        """Cancel every job and wait until none is active: each test starts on idle cards."""
        self.command("scancel", "--user", str(os.getuid()), check=False)
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            out = self.command("squeue", "-h", "-t", "PD,R,CG,CF", "-o", "%i", check=False)
            if out.returncode == 0 and not out.stdout.strip():
                return
            time.sleep(0.2)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _write_config(directory: Path, ports: tuple[int, int]) -> None:
    socket_path = directory / "munge" / "munge.sock"
    lines = [
        "ClusterName=gputoptest",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={socket_path}",
        f"StateSaveLocation={directory / 'state'}",
        f"SlurmdSpoolDir={directory / 'spool'}",
        f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
        f"SlurmdPidFile={directory / 'slurmd.pid'}",
        f"SlurmctldLogFile={directory / 'slurmctld.log'}",
        f"SlurmdLogFile={directory / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "GresTypes=gpu",
        "MpiDefault=none",
        "ReturnToService=2",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=sched_interval=1",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SlurmdParameters=config_overrides",
        "MailProg=/bin/true",
        f"NodeName={NODE_NAME} NodeHostname={socket.gethostname()} NodeAddr=127.0.0.1 "
        f"CPUs={CPUS} Gres=gpu:{GPU_COUNT} RealMemory=1000 State=UNKNOWN",
        f"PartitionName=debug Nodes={NODE_NAME} Default=YES MaxTime=INFINITE State=UP",
    ]
    (directory / "slurm.conf").write_text("\n".join(lines) + "\n")
    devices = directory / "dev" / f"nvidia[0-{GPU_COUNT - 1}]"
    (directory / "gres.conf").write_text(f"Name=gpu File={devices}\n")


def _make_devices(device_dir: Path) -> None:
    device_dir.mkdir()
    for index in range(GPU_COUNT):
        os.mknod(device_dir / f"nvidia{index}", 0o600 | stat.S_IFCHR, os.makedev(195, index))


def _start(cluster: SlurmCluster, name: str, argv: list[str]) -> None:
    out = open(cluster.directory / f"{name}.out", "wb")  # noqa: SIM115 - the daemon's stdout
    cluster.processes.append(
        subprocess.Popen(
            argv, env=cluster.env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    )
    out.close()


def _wait_idle(cluster: SlurmCluster) -> str | None:
    """None once the node is idle; else why not."""
    deadline = time.monotonic() + START_DEADLINE_S
    last = ""
    while time.monotonic() < deadline:
        for process in cluster.processes:
            if process.poll() is not None:
                return f"{Path(str(process.args[0])).name} exited with {process.returncode}"  # type: ignore[index]
        out = cluster.command("sinfo", "-h", "-N", "-o", "%T", check=False)
        last = (out.stdout + out.stderr).strip()
        if out.returncode == 0 and last == "idle":
            return None
        time.sleep(0.2)
    return f"the node did not become idle in {START_DEADLINE_S:g} s (sinfo: {last})"


def start_cluster(directory: Path) -> SlurmCluster:
    missing = [name for name in PROGRAMS if _program(name) is None]
    if missing:
        cannot(
            f"Slurm and munge are not installed ({', '.join(missing)} missing): "
            "apt-get install slurmctld slurmd slurm-client munge"
        )
    if os.geteuid() != 0:
        cannot("the one-node Slurm cluster needs root: slurmd starts jobs as their user")
    directory.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "spool", "munge"):
        (directory / sub).mkdir()
    (directory / "munge").chmod(0o755)
    try:
        _make_devices(directory / "dev")
    except OSError as error:
        cannot(f"cannot create the GPU device files with mknod: {error.strerror or error}")
    _write_config(directory, (free_port(), free_port()))
    cluster = SlurmCluster(directory)
    key = directory / "munge.key"
    subprocess.run(
        [_program("mungekey") or "mungekey", "--create", f"--keyfile={key}"],
        check=True,
        capture_output=True,
    )
    munge = directory / "munge"
    _start(
        cluster,
        "munged",
        [
            _program("munged") or "munged",
            "-F",
            "--force",
            f"--key-file={key}",
            f"--socket={munge / 'munge.sock'}",
            f"--pid-file={munge / 'munged.pid'}",
            f"--seed-file={munge / 'munged.seed'}",
            f"--log-file={directory / 'munged.log'}",
        ],
    )
    deadline = time.monotonic() + START_DEADLINE_S
    while not (munge / "munge.sock").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    _start(cluster, "slurmctld", [_program("slurmctld") or "slurmctld", "-D", "-i"])
    _start(cluster, "slurmd", [_program("slurmd") or "slurmd", "-D", "-N", NODE_NAME])
    problem = _wait_idle(cluster)
    if problem is not None:
        logs = cluster.logs()
        cluster.stop()
        cannot(f"the Slurm daemons did not start: {problem}\n{logs}")
    return cluster


def session_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    directory = tmp_path_factory.mktemp("slurm")
    cluster = start_cluster(directory)
    try:
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.cancel_everything()
        cluster.stop()


def cluster_for_test(
    slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SlurmCluster]:
    """The cluster, ``SLURM_CONF`` set for this test, and no job left over afterwards."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    yield slurm_cluster
    slurm_cluster.cancel_everything()
