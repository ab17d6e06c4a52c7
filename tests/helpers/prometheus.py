"""Real components for the exporter's tests: ``gputop exporter`` as a process, a real
Prometheus server (the distribution's ``prometheus`` package, which .ci/run installs) that
scrapes it every second, and ``promtool check metrics``. See docs/exporter.md.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.real_components import cannot
from helpers.sshd import free_port
from helpers.waiting import wait_for

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
START_TIMEOUT_S = 60.0
SERVING = re.compile(r"serving (\S+)")
DCGM_LABEL_LINT = re.compile(
    r"^\S+ label names should be written in 'snake_case' not 'camelCase'$"
    r"|^DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'$"
)
"""promtool's complaints it may make: dcgm-exporter's own labels (UUID, modelName,
Hostname) are camelCase, and its PCIe replay metric's name says "counter"; gputop keeps both
so that dcgm-exporter's dashboards work unchanged (docs/exporter.md)."""


def http_get(url: str, timeout_s: float = 10.0, context: Any = None) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s, context=context) as response:
        return str(response.read().decode("utf-8"))


@dataclass
class Exporter:
    process: subprocess.Popen[str]
    url: str

    def scrape(self) -> str:
        return http_get(self.url)


@contextmanager
def running_exporter(
    *args: str, frozen_at_s: float | None = 30.0, env: dict[str, str] | None = None
) -> Iterator[Exporter]:
    """``gputop exporter ARGS`` until the block ends (then SIGTERM, and it must exit 0);
    ``env``: its whole environment instead of this process's."""
    env = dict(os.environ if env is None else env)
    if frozen_at_s is not None:
        env["GPUTOP_FAKE_TIME"] = str(frozen_at_s)
    process = subprocess.Popen(
        [sys.executable, "-m", "gputop", "exporter", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    said: list[str] = []
    # Its standard error is read all along: a pipe nobody reads fills (64 KB) and then
    # blocks the exporter's next message, and with it the exporter.
    reader = threading.Thread(target=_read_all, args=(process, said), daemon=True)
    try:
        url = _serving_url(process)
        reader.start()
        yield Exporter(process, url)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(
                f"gputop exporter did not stop on SIGTERM; it said: {''.join(said)[-2000:]!r}"
            ) from None
    if reader.is_alive():
        reader.join(5)
    assert process.returncode == 0, "".join(said)


def _read_all(process: subprocess.Popen[str], said: list[str]) -> None:
    """Everything ``process`` writes to its standard error from now on, line by line."""
    if process.stderr is not None:
        for line in process.stderr:
            said.append(line)


def _serving_url(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    said: list[str] = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 0.5)
        if ready:
            line = process.stderr.readline()
            if not line:
                break
            said.append(line)
            match = SERVING.search(line)
            if match:
                return match.group(1)
    raise AssertionError(f"gputop exporter did not start: {''.join(said)!r}")


def promtool_or_skip() -> str:
    if not os.access(PROMTOOL, os.X_OK) and shutil.which("promtool") is None:
        cannot("needs promtool (Debian package prometheus; .ci/run installs it)")
    return PROMTOOL if os.access(PROMTOOL, os.X_OK) else str(shutil.which("promtool"))


def promtool_problems(exposition: str) -> list[str]:
    """What ``promtool check metrics`` says of ``exposition``, besides its lints of
    dcgm-exporter's own names (DCGM_LABEL_LINT); a parse error (exit 1) is a problem too."""
    checked = subprocess.run(
        [promtool_or_skip(), "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    lines = (checked.stdout + checked.stderr).splitlines()
    problems = [line for line in lines if not DCGM_LABEL_LINT.match(line)]
    if checked.returncode not in (0, 3):  # 3: lint findings only
        problems.append(f"promtool exited {checked.returncode}")
    return problems


@dataclass
class Prometheus:
    process: subprocess.Popen[bytes]
    url: str

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """The vector result of an instant query (``at``: evaluation time, seconds)."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._api("query", params)

    def query_range(self, promql: str, start: float, end: float, step_s: float) -> list[Any]:
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}"}
        params["step"] = f"{step_s:g}"
        return self._api("query_range", params)

    def _api(self, endpoint: str, params: dict[str, str]) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode(params)
        document = json.loads(http_get(f"{self.url}/api/v1/{endpoint}?{query}"))
        assert document["status"] == "success", document
        return list(document["data"]["result"])


@contextmanager
def running_prometheus(directory: Path, target: str) -> Iterator[Prometheus]:
    """A real Prometheus on a free loopback port, scraping ``target`` (``host:port``) every
    second, with its config and its storage in ``directory``; never the distribution's
    service."""
    if not os.access(PROMETHEUS, os.X_OK):
        cannot("needs a Prometheus server (Debian package prometheus; .ci/run installs it)")
    config = directory / "prometheus.yml"
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: gputop\n"
        "    scrape_interval: 1s\n"
        "    scrape_timeout: 1s\n"
        f"    static_configs: [{{targets: ['{target}']}}]\n",
        encoding="utf-8",
    )
    port = free_port()
    log = open(directory / "prometheus.log", "wb")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=directory,
    )
    server = Prometheus(process, f"http://127.0.0.1:{port}")
    yield from serving(server, directory, log, lambda: _ready(server))


def serving(
    server: Prometheus, directory: Path, log: Any, ready: Callable[[], bool]
) -> Iterator[Prometheus]:
    """``server`` once ``ready`` says it answers (or why it did not start, from its log in
    ``directory``), stopped and its ``log`` closed afterwards."""
    process = server.process
    try:
        wait_for(lambda: ready() or process.poll() is not None, "Prometheus", START_TIMEOUT_S)
        if process.poll() is not None:
            raise AssertionError(
                "Prometheus did not start: "
                + (directory / "prometheus.log").read_text(errors="replace")[-2000:]
            )
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _ready(server: Prometheus) -> bool:
    try:
        http_get(f"{server.url}/-/ready", timeout_s=1.0)
    except OSError:
        return False
    return True
