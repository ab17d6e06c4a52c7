"""A real OpenSSH server on 127.0.0.1 for the lab tests, and an ssh config of host aliases.

The server runs as the test's user with a generated host key; the client config names
aliases that each reach it with a different simulated machine, chosen by ``SetEnv``
(the server accepts ``GPUTOP_*``): ``GPUTOP_FAKE`` picks the scenario, ``GPUTOP_PATH``
puts this worktree's gputop (or, for the reduced-mode alias, only a stand-in nvidia-smi)
first on the remote PATH, ``GPUTOP_STATE_DIR`` gives each alias its own job store. Other
aliases fail on purpose: an unknown host key, a key the server refuses, a closed port.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from gputop.core.jobs.launchers import free_port  # one helper for every test
from helpers.real_components import cannot

VENV_BIN = Path(sys.executable).parent
SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")

# alias -> scenario
FULL_ALIASES = {"gpu-v100": "v100x4", "gpu-dgx": "dgx-h100", "gpu-mixed": "mixed"}
REDUCED_ALIAS = "gpu-reduced"
HOSTILE_ALIAS = "gpu-hostile"
"""A host whose ``gputop`` on PATH is a script that prints absurd agent lines."""
NESTED_ALIAS = "gpu-nested"
"""A host whose ``gputop`` prints a line nested too deeply and a number of 401 digits."""

FAKE_UUID_0 = "GPU-0d1e0000-aaaa-bbbb-cccc-000000000000"
FAKE_UUID_1 = "GPU-0d1e0001-aaaa-bbbb-cccc-000000000001"
GPU0_READINGS = (
    "16384, 12000, 4384, 97, 40, 71, [N/A], 250.31, 300.00, 1530, 1530, 877, 1530, 1530, 877, "
    "P0, 535.104.05, Tesla V100-SXM2-16GB"
)
GPU1_READINGS = (
    "16384, 0, 16384, 0, 0, 33, [N/A], [Not Supported], 300.00, 135, 135, 877, 1530, 1530, "
    "877, P8, 535.104.05, Tesla V100-SXM2-16GB"
)
# Fields in the order gputop asks for them (gputop/core/remote/reduced.py GPU_FIELDS).
FAKE_NVIDIA_SMI = f"""#!/bin/sh
# A stand-in for the driver's nvidia-smi on a server without gputop: prints CSV.
case "$1" in
--query-gpu=index,uuid,*)
  echo "0, {FAKE_UUID_0}, 00000000:07:00.0, {GPU0_READINGS}"
  echo "1, {FAKE_UUID_1}, 00000000:08:00.0, {GPU1_READINGS}"
  ;;
--query-compute-apps=*)
  echo "{FAKE_UUID_0}, 4242, 11990, python train.py --name a, b"
  ;;
*) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
"""

HOSTILE_SNAPSHOT = {
    "schema": 1,
    "host": "evil\x1b]0;pwned\x07",
    "timestamp": 1e308,
    "gpus": [
        {
            "index": 0,
            "name": "GPU\x1b[2J[/]",
            "uuid": "GPU-bad",
            "power_w": float("nan"),
            "power_limit_w": float("inf"),
            "memory_total_bytes": 17179869184,
            "memory_used_bytes": -5,
            "temperature_c": 10**20,
            "utilization_gpu": -400,
            "processes": [],
        }
    ],
}


def hostile_agent_script() -> str:
    """A stand-in ``gputop``: absurd lines, then waits for stdin to close like the agent."""
    lines = [
        json.dumps({"type": "hello", "protocol": 1, "mode": "full", "user": "x\x1b[2J"}),
        "login banner \x1b]0;title\x07",
        json.dumps({"type": "snapshot", "snapshot": HOSTILE_SNAPSHOT}),
        json.dumps({"type": "jobs", "jobs": [{"id": "x"}, {"id": 1, "gpus": "0"}]}),
    ]
    return "#!/bin/sh\ncat <<'EOF'\n" + "\n".join(lines) + "\nEOF\nexec cat >/dev/null\n"


NESTED_SNAPSHOT = {
    "schema": 1,
    "host": "nested",
    "timestamp": 1e9,
    "gpus": [
        {
            "index": 0,
            "name": "Tesla V100-SXM2-16GB",
            "uuid": "GPU-nested",
            "power_w": 10**400,
            "memory_total_bytes": 17179869184,
            "memory_used_bytes": 0,
            "processes": [],
        }
    ],
}


def nested_agent_script() -> str:
    """A stand-in ``gputop``: a line nested deeper than any decoder recurses, then a
    snapshot whose power is a whole number of 401 digits; then waits like the agent."""
    depth = 100_000
    lines = [
        json.dumps({"type": "hello", "protocol": 1, "mode": "full", "user": "x"}),
        '{"type":"snapshot","snapshot":' + "[" * depth + "]" * depth + "}",
        json.dumps({"type": "snapshot", "snapshot": NESTED_SNAPSHOT}),
    ]
    return "#!/bin/sh\ncat <<'EOF'\n" + "\n".join(lines) + "\nEOF\nexec cat >/dev/null\n"


def find_sshd() -> str | None:
    found = shutil.which("sshd")
    if found:
        return found
    return next((path for path in SSHD_CANDIDATES if os.access(path, os.X_OK)), None)


@dataclass
class SshServer:
    directory: Path
    sshd: str
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def sshd_config(self) -> Path:
        return self.directory / "sshd_config"

    @property
    def ssh_config(self) -> Path:
        return self.directory / "ssh_config"

    def state_dir(self, alias: str) -> Path:
        return self.directory / "state" / alias

    def prepare(self) -> None:
        d = self.directory
        for key in ("host_key", "user_key", "stranger_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True
            )
        (d / "authorized_keys").write_text((d / "user_key.pub").read_text())
        host_public = (d / "host_key.pub").read_text().split()[:2]
        (d / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {' '.join(host_public)}\n")
        (d / "empty_known_hosts").write_text("")
        hostile_bin = d / "hostile-bin"
        hostile_bin.mkdir()
        (hostile_bin / "gputop").write_text(hostile_agent_script())
        (hostile_bin / "gputop").chmod(0o755)
        nested_bin = d / "nested-bin"
        nested_bin.mkdir()
        (nested_bin / "gputop").write_text(nested_agent_script())
        (nested_bin / "gputop").chmod(0o755)
        smi_bin = d / "smi-bin"
        smi_bin.mkdir()
        (smi_bin / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
        (smi_bin / "nvidia-smi").chmod(0o755)
        self.sshd_config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {d / 'host_key'}",
                    f"AuthorizedKeysFile {d / 'authorized_keys'}",
                    f"PidFile {d / 'sshd.pid'}",
                    "StrictModes no",
                    "UsePAM no",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    # PYTHONUSERBASE: `hosts install` tests put `pip install --user` in a
                    # private place (tests/real/test_hosts_install.py).
                    "AcceptEnv GPUTOP_* PYTHONUSERBASE",
                    "PrintMotd no",
                    "LogLevel ERROR",
                    "",
                ]
            )
        )
        self.ssh_config.write_text(self._client_config(smi_bin))

    def _client_config(self, smi_bin: Path) -> str:
        d = self.directory
        blocks = []

        def host(alias: str, *lines: str, port: int | None = None, key: str = "user_key") -> None:
            blocks.append(
                "\n".join(
                    [
                        f"Host {alias}",
                        "  HostName 127.0.0.1",
                        f"  Port {port or self.port}",
                        f"  IdentityFile {d / key}",
                        "  IdentitiesOnly yes",
                        "  IdentityAgent none",
                        "  ControlMaster no",
                        "  ControlPath none",
                        "  GlobalKnownHostsFile /dev/null",
                        "  StrictHostKeyChecking yes",
                        "  LogLevel ERROR",
                        *(f"  {line}" for line in lines),
                    ]
                )
            )

        known = f"UserKnownHostsFile {d / 'known_hosts'}"
        for alias, scenario in FULL_ALIASES.items():
            host(
                alias,
                known,
                f"SetEnv GPUTOP_FAKE={scenario} GPUTOP_FAKE_TIME=30 GPUTOP_PATH={VENV_BIN} "
                f"GPUTOP_STATE_DIR={self.state_dir(alias)}",
            )
        host(
            REDUCED_ALIAS,
            known,
            f"SetEnv GPUTOP_PATH={smi_bin} GPUTOP_STATE_DIR={self.state_dir(REDUCED_ALIAS)}",
        )
        host(
            HOSTILE_ALIAS,
            known,
            f"SetEnv GPUTOP_PATH={d / 'hostile-bin'} "
            f"GPUTOP_STATE_DIR={self.state_dir(HOSTILE_ALIAS)}",
        )
        host(
            NESTED_ALIAS,
            known,
            f"SetEnv GPUTOP_PATH={d / 'nested-bin'} "
            f"GPUTOP_STATE_DIR={self.state_dir(NESTED_ALIAS)}",
        )
        host("gpu-newkey", f"UserKnownHostsFile {d / 'empty_known_hosts'}")
        host("gpu-nokey", known, key="stranger_key")
        host("gpu-closed", known, port=free_port())
        return "\n\n".join(blocks) + "\n"

    def add_alias(self, alias: str, *lines: str) -> None:
        """One more alias reaching this server with the test's key, its host key known."""
        d = self.directory
        block = [
            f"Host {alias}",
            "  HostName 127.0.0.1",
            f"  Port {self.port}",
            f"  IdentityFile {d / 'user_key'}",
            "  IdentitiesOnly yes",
            "  IdentityAgent none",
            "  ControlMaster no",
            "  ControlPath none",
            "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes",
            f"  UserKnownHostsFile {d / 'known_hosts'}",
            "  LogLevel ERROR",
            *(f"  {line}" for line in lines),
        ]
        with self.ssh_config.open("a") as config:
            config.write("\n" + "\n".join(block) + "\n")

    def start(self) -> None:
        """Run sshd in the foreground (-D) and wait until it accepts connections."""
        self.process = subprocess.Popen(
            [self.sshd, "-D", "-e", "-f", str(self.sshd_config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                error = self.process.stderr.read().decode() if self.process.stderr else ""
                cannot(f"sshd would not start here: {error.strip()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)  # polling a port until it opens, not a fixed wait
        pytest.fail("sshd did not accept connections within 10 s")

    def sessions(self) -> list[psutil.Process]:
        """The per-connection sshd processes (and what they run) under the listener."""
        if self.process is None:
            return []
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def kill(self) -> None:
        """The server dies: the listener and every connection it holds."""
        if self.process is None:
            return
        victims = [*self.sessions()]
        self.process.kill()
        self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()
        for victim in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                victim.kill()
        psutil.wait_procs(victims, timeout=5)
        self.process = None

    def freeze(self, frozen: bool) -> None:
        """SIGSTOP / SIGCONT every connection's processes: a hung server, connection open."""
        for process in self.sessions():
            with contextlib.suppress(psutil.NoSuchProcess):
                if frozen:
                    process.suspend()
                else:
                    process.resume()


def start_server(directory: Path) -> SshServer:
    sshd = find_sshd()
    if sshd is None:
        cannot("OpenSSH's sshd is not installed (Debian: apt-get install openssh-server)")
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        cannot("OpenSSH's client (ssh, ssh-keygen) is not installed")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    server = SshServer(directory, sshd)
    server.prepare()
    server.start()
    return server
