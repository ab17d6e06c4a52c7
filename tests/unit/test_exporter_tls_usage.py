"""``gputop exporter --tls-cert/--tls-key``: a file that is missing, no file, or no PEM
certificate or key is a usage error (exit 2, as ``--prometheus-ca``'s), named with its
option, said before the GPUs are sampled and never a traceback."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.jobs import run_cli
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
