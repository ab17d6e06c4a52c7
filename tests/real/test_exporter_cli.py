"""``gputop exporter`` as a person starts it: where it listens, what it refuses, TLS.

The loopback default is checked on the listening socket itself, in a network namespace of
its own (``unshare -n``), so the default port is free whatever else runs on this machine.
See docs/exporter.md.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
from pathlib import Path

import pytest
from helpers.prometheus import http_get, running_exporter
from helpers.real_components import cannot
from helpers.waiting import wait_for

from gputop.cli.main import main
from gputop.core.exporter.listen import DEFAULT_PORT, parse_listen


def _unshare_net_or_skip() -> list[str]:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        cannot("needs unshare(1) as root for a network namespace of the test's own")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        cannot(f"unshare cannot create a network namespace here: {probe.stderr.strip()}")
    return ["unshare", "-n"]


def _in_own_network_namespace(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    except OSError:
        return False


def _listening(pid: int) -> list[tuple[str, int]]:
    """The listening TCP sockets of the network namespace ``pid`` is in, as the kernel lists
    them (``/proc/PID/net/tcp``: psutil would read this test's namespace instead)."""
    found: list[tuple[str, int]] = []
    for table, width in (("tcp", 4), ("tcp6", 16)):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            return []
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            if state != "0A":  # TCP_LISTEN
                continue
            address, port = local.split(":")
            packed = b"".join(
                int(address[i : i + 8], 16).to_bytes(4, "little") for i in range(0, width * 2, 8)
            )
            family = socket.AF_INET if width == 4 else socket.AF_INET6
            found.append((socket.inet_ntop(family, packed), int(port, 16)))
    return found


def test_by_default_the_exporter_listens_on_loopback_only_on_the_documented_port() -> None:
    command = [*_unshare_net_or_skip(), sys.executable, "-m", "gputop", "exporter"]
    process = subprocess.Popen(
        command,
        env={**os.environ, "GPUTOP_FAKE": "demo"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        # unshare execs the exporter: the same pid, once in its own namespace
        listening = wait_for(
            lambda: _in_own_network_namespace(process.pid) and _listening(process.pid),
            "the exporter to listen",
        )
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert listening == [("127.0.0.1", DEFAULT_PORT)]
    assert b"reachable from other machines" not in stderr
    assert process.returncode == 0


def test_another_address_is_said_to_be_reachable_from_other_machines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = [*_unshare_net_or_skip(), sys.executable, "-m", "gputop", "exporter"]
    process = subprocess.Popen(
        [*command, "--fake", "demo", "--listen", "0.0.0.0:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    try:
        serving = process.stderr.readline()
        warning = process.stderr.readline()
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=20)
    assert "serving http://0.0.0.0:" in serving
    assert "reachable from other machines" in warning


@pytest.mark.parametrize(
    ("listen", "said"),
    [
        ("9401", "give HOST:PORT"),
        ("example.org:9401", "'example.org' is not an IP address"),
        ("127.0.0.1:99999", "out of range"),
        ("127.0.0.1:٩٤٠١", "not a whole number"),
    ],
)
def test_a_bad_listen_address_is_refused_with_what_to_write(
    listen: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["exporter", "--fake", "demo", "--listen", listen]) == 2
    error = capsys.readouterr().err
    assert said in error
    assert "Traceback" not in error


def test_a_taken_port_is_a_message_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code = main(["exporter", "--fake", "demo", "--listen", f"127.0.0.1:{port}"])
    error = capsys.readouterr().err
    assert code == 1
    assert f"Cannot serve metrics on 127.0.0.1:{port}" in error
    assert "--listen" in error


def test_listen_accepts_ipv6_and_localhost() -> None:
    assert parse_listen("[::1]:9401").url(9401) == "http://[::1]:9401/metrics"
    assert parse_listen("[::1]:0").is_loopback
    assert parse_listen("localhost:1").host == "127.0.0.1"
    assert not parse_listen("0.0.0.0:1").is_loopback


def test_tls_serves_the_metrics_over_https_with_the_given_certificate(tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        cannot("needs openssl(1) to make a certificate (.ci/run installs it)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    files = ["-keyout", str(key), "-out", str(cert)]
    subject = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *subject, *files],
        check=True,
        capture_output=True,
    )
    args = ["--fake", "demo", "--listen", "127.0.0.1:0", "--tls-cert", str(cert)]
    with running_exporter(*args, "--tls-key", str(key)) as exporter:
        assert exporter.url.startswith("https://127.0.0.1:")
        context = ssl.create_default_context(cafile=str(cert))
        assert "DCGM_FI_DEV_GPU_UTIL" in http_get(exporter.url, context=context)
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            http_get(exporter.url, context=ssl.create_default_context())


def test_tls_needs_both_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["exporter", "--fake", "demo", "--tls-cert", "x.pem"]) == 2
    assert "--tls-cert and --tls-key go together" in capsys.readouterr().err


def test_scrapes_are_answered_from_the_newest_sample_never_by_sampling_again() -> None:
    args = ("--fake", "demo", "--listen", "127.0.0.1:0", "--interval", "3600")
    with running_exporter(*args) as exporter:
        for _ in range(5):
            exposition = exporter.scrape()
    assert 'gputop_samples_total{Hostname="' in exposition
    (count,) = [line for line in exposition.splitlines() if line.startswith("gputop_samples_total")]
    assert count.endswith(" 1.0")  # five scrapes, one sample (taken at start)


def test_report_prometheus_at_a_server_that_is_not_prometheus_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("--fake", "demo", "--listen", "127.0.0.1:0", "--interval", "3600")
    with running_exporter(*args) as exporter:  # answers text, not the API's JSON
        server = exporter.url.removesuffix("/metrics")
        assert main(["report", "--prometheus", server]) == 1
    error = capsys.readouterr().err
    assert f"{server} did not answer as Prometheus's API does (not JSON)" in error
