"""A fleet for the tests: simulated nodes (tests/helpers/fleet_nodes.py, one process, one port
per node), real ``gputop exporter --fake`` processes, and a real Prometheus scraping them
all, optionally behind basic auth (``--web.config.file`` with a bcrypt hash made by the
system's libcrypt). See docs/fleet.md."""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from helpers.prometheus import PROMETHEUS, Prometheus, http_get, serving
from helpers.real_components import cannot
from helpers.sshd import free_port

NODES_SCRIPT = Path(__file__).with_name("fleet_nodes.py")
QUERY_COUNTER = re.compile(
    r'^prometheus_http_requests_total\{code="(\d+)",handler="/api/v1/query"\} (\S+)$', re.M
)


@contextmanager
def simulated_nodes(directory: Path, nodes: list[dict[str, Any]]) -> Iterator[list[str]]:
    """The nodes served, one port each: their ``host:port`` targets, in order."""
    spec = directory / "nodes.json"
    spec.write_text(json.dumps(nodes), encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, str(NODES_SCRIPT), str(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORTS "), line
        yield [f"127.0.0.1:{port}" for port in json.loads(line[6:])]
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by ``openssl``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        cannot("needs openssl for a certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def bcrypt_hash(password: str) -> str:
    """A bcrypt hash of ``password``, by the system's libcrypt (libxcrypt has bcrypt)."""
    try:
        lib = ctypes.CDLL("libcrypt.so.1")
    except OSError:
        cannot("needs libcrypt.so.1 (libxcrypt) for a bcrypt hash")
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = (
        b"$2b$05$"
        + os.urandom(16)
        .hex()[:21]
        .encode()
        .translate(bytes.maketrans(b"0123456789abcdef", b"./ABCDEFGHIJKLMN"))
        + b"e"
    )
    hashed = lib.crypt(password.encode(), salt)
    if not hashed or not hashed.startswith(b"$2b$"):
        cannot("the system's libcrypt has no bcrypt")
    return hashed.decode()


@contextmanager
def fleet_prometheus(
    directory: Path,
    targets: list[str],
    interval_s: float = 1.0,
    basic_auth: tuple[str, str] | None = None,
    tls: tuple[Path, Path] | None = None,
) -> Iterator[Prometheus]:
    """A real Prometheus scraping ``targets`` (job ``nodes``) and itself every
    ``interval_s``; behind basic auth where ``basic_auth`` is (user, password); serving
    https with ``tls`` (certificate, key)."""
    if not os.access(PROMETHEUS, os.X_OK):
        cannot("needs a Prometheus server (Debian package prometheus; .ci/run installs it)")
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    interval = f"{interval_s:g}s"
    config = directory / "prometheus.yml"
    self_scrape = (
        ""
        if basic_auth
        else (
            f"  - job_name: prometheus\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
        )
    )
    config.write_text(
        "global:\n"
        f"  scrape_interval: {interval}\n"
        f"  scrape_timeout: {interval}\n"
        f"  evaluation_interval: {interval}\n"
        "scrape_configs:\n"
        "  - job_name: nodes\n"
        f"    static_configs: [{{targets: {json.dumps(targets)}, labels: {{cluster: a}}}}]\n"
        + self_scrape,
        encoding="utf-8",
    )
    command = [
        PROMETHEUS,
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    web_config = ""
    if basic_auth is not None:
        web_config += f"basic_auth_users:\n  {basic_auth[0]}: '{bcrypt_hash(basic_auth[1])}'\n"
    if tls is not None:
        web_config += f"tls_server_config:\n  cert_file: {tls[0]}\n  key_file: {tls[1]}\n"
    if web_config:
        web = directory / "web.yml"
        web.write_text(web_config, encoding="utf-8")
        command.append(f"--web.config.file={web}")
    log = open(directory / "prometheus.log", "wb")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=directory
    )
    scheme = "https" if tls else "http"
    server = Prometheus(process, f"{scheme}://127.0.0.1:{port}")
    context = ssl.create_default_context(cafile=str(tls[0])) if tls else None
    yield from serving(server, directory, log, lambda: _answers(server.url, context))


def _answers(url: str, context: ssl.SSLContext | None = None) -> bool:
    """Prometheus answers HTTP (a 401 behind basic auth counts: it is up)."""
    try:
        http_get(f"{url}/-/ready", timeout_s=1.0, context=context)
    except urllib.request.HTTPError as error:
        return error.code == 401
    except OSError:
        return False
    return True


def instant_queries_answered(prometheus: Prometheus) -> float:
    """``prometheus_http_requests_total`` of ``/api/v1/query``, every status, read from
    Prometheus's own ``/metrics`` (reading it is no query)."""
    page = http_get(f"{prometheus.url}/metrics")
    return sum(float(value) for _, value in QUERY_COUNTER.findall(page))
