"""``gputop exporter --tls-cert/--tls-key``: a file that is missing, no file, or no PEM
certificate or key is a usage error (exit 2, as ``--prometheus-ca``'s), named with its
option, said before the GPUs are sampled and never a traceback."""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers.jobs import PYTHON, run_cli
from helpers.real_components import cannot


def exporter(cert: Path, key: Path) -> subprocess.CompletedProcess[str]:
    args = ("exporter", "--fake", "demo", "--listen", "127.0.0.1:0")
    return run_cli(*args, "--tls-cert", str(cert), "--tls-key", str(key), timeout=20)  # type: ignore[no-any-return]


def made_pair(tmp_path: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        cannot("needs openssl(1) to make a certificate (.ci/run installs it)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    files = ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"]
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *files],
        check=True,
        capture_output=True,
    )
    return cert, key


def refused(done: subprocess.CompletedProcess[str], *said: str) -> None:
    assert done.returncode == 2, done.stderr
    for words in said:
        assert words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "serving" not in done.stderr


@pytest.mark.parametrize("missing", ["--tls-cert", "--tls-key"])
def test_a_missing_file_is_a_usage_error_naming_its_option(missing: str, tmp_path: Path) -> None:
    cert, key = made_pair(tmp_path)
    gone = tmp_path / "gone.pem"
    done = exporter(gone, key) if missing == "--tls-cert" else exporter(cert, gone)
    refused(done, f"{missing} {str(gone)!r}", "No such file or directory")


def test_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    _cert, key = made_pair(tmp_path)
    refused(exporter(tmp_path, key), f"--tls-cert {str(tmp_path)!r}", "not a regular file")


@pytest.mark.parametrize("bad", ["--tls-cert", "--tls-key"])
def test_a_file_that_is_no_pem_certificate_or_key_is_a_usage_error(
    bad: str, tmp_path: Path
) -> None:
    cert, key = made_pair(tmp_path)
    junk = tmp_path / "junk.pem"
    junk.write_text("this is not PEM\n")
    done = exporter(junk, key) if bad == "--tls-cert" else exporter(cert, junk)
    what = "certificate" if bad == "--tls-cert" else "private key"
    refused(done, f"{bad} {str(junk)!r}", f"no PEM {what}")


def test_a_key_of_another_certificate_is_a_usage_error_naming_both(tmp_path: Path) -> None:
    cert, _key = made_pair(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    _cert, other_key = made_pair(other)
    refused(exporter(cert, other_key), f"--tls-cert {str(cert)!r}", f"--tls-key {str(other_key)!r}")


def run_on_a_terminal(argv: list[str], deadline_s: float = 20.0) -> tuple[int | None, str]:
    """``argv`` with a terminal of its own as its controlling one (where OpenSSL asks a
    key's passphrase); (exit status, or None if it still runs at the deadline; what it
    wrote). A command still running then is killed."""
    pid, master = pty.fork()
    if pid == 0:  # the child: its terminal is the pty's
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    written = b""
    deadline = time.monotonic() + deadline_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the child has closed its terminal
                    chunk = b""
                if not chunk:
                    break
                written += chunk
        done, status = os.waitpid(pid, os.WNOHANG)
        while done == 0 and time.monotonic() < deadline:  # its terminal closed: it is ending
            time.sleep(0.02)
            done, status = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None, written.decode(errors="replace")
        return os.waitstatus_to_exitcode(status), written.decode(errors="replace")
    finally:
        os.close(master)


def test_an_encrypted_key_is_a_usage_error_and_no_passphrase_is_asked(tmp_path: Path) -> None:
    """OpenSSL asks an encrypted key's passphrase on the terminal, and waited there (under a
    service manager, with no terminal, it failed as "bad decrypt"): the exporter never
    reads a secret from the terminal; the key must be one without a passphrase."""
    cert, key = made_pair(tmp_path)
    encrypted = tmp_path / "encrypted.pem"
    openssl = shutil.which("openssl")
    assert openssl is not None  # made_pair has it
    subprocess.run(
        [openssl, "pkey", "-in", str(key), "-aes256", "-passout", "pass:x", "-out", str(encrypted)],
        check=True,
        capture_output=True,
    )
    argv = [PYTHON, "-m", "gputop", "exporter", "--fake", "demo", "--listen", "127.0.0.1:0"]
    status, written = run_on_a_terminal(
        [*argv, "--tls-cert", str(cert), "--tls-key", str(encrypted)]
    )
    assert "pass phrase" not in written.lower(), written
    assert status == 2, written
    assert f"--tls-key {str(encrypted)!r}" in written and "passphrase" in written, written
    assert "Traceback" not in written
    done = exporter(cert, encrypted)  # no terminal: the same message
    refused(done, f"--tls-key {str(encrypted)!r}", "passphrase")
