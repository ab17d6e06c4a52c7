"""Small things a careless or hostile user meets: advice that would break a machine, a
metrics filter that answered nothing, an address that is loopback in disguise, a help text.
See docs/security.md, "Smaller cases".
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

import pytest
from helpers.prometheus import http_get, running_exporter
from prometheus_client.parser import text_string_to_metric_families

from gputop.cli.main import main
from gputop.core.exporter.listen import ListenAddress, parse_listen


@pytest.mark.parametrize("directory", ["/", "/tmp", "/dev"])
def test_record_in_a_system_directory_never_advises_to_chmod_it(
    capsys: pytest.CaptureFixture[str], directory: str
) -> None:
    store = os.path.join(directory, "gputop-test-history.sqlite3")
    assert main(["record", "--fake", "demo", "--db", store, "--count", "1"]) == 2
    err = capsys.readouterr().err
    assert f"the directory {directory} is open to other users" in err
    assert "chmod" not in err and f"Do not make {directory} private" in err
    assert "give a path in a new directory of your own" in err
    assert not os.path.lexists(store)


def test_record_in_an_open_directory_of_ones_own_says_how_to_close_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "projects"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    monkeypatch.setattr("gputop.cli.record_command._home", lambda: tmp_path)  # as if home
    assert main(["record", "--fake", "demo", "--db", str(shared / "h.sqlite3")]) == 2
    assert f"chmod 700 {shared}" in capsys.readouterr().err
    assert list(shared.iterdir()) == []


def test_an_ipv4_mapped_loopback_address_is_loopback() -> None:
    address = parse_listen("[::ffff:127.0.0.1]:9401")
    assert address == ListenAddress("127.0.0.1", 9401) and address.is_loopback
    assert ListenAddress("::ffff:127.0.0.1", 9401).is_loopback
    assert not parse_listen("[::ffff:10.1.2.3]:9401").is_loopback


def test_the_exporter_on_a_mapped_loopback_address_does_not_warn_and_filters_by_name() -> None:
    args = ("--fake", "demo", "--listen", "[::ffff:127.0.0.1]:0", "--interval", "3600")
    with running_exporter(*args) as exporter:
        assert exporter.url.startswith("http://127.0.0.1:")
        query = urllib.parse.urlencode(
            [("name[]", "DCGM_FI_DEV_GPU_UTIL"), ("name[]", "gputop_samples_total")]
        )
        filtered = http_get(f"{exporter.url}?{query}")
        nothing = http_get(f"{exporter.url}?{urllib.parse.urlencode({'name[]': 'no_such'})}")
        whole = exporter.scrape()
    assert exporter.process.stderr is not None
    assert "reachable from other machines" not in exporter.process.stderr.read()
    families = {family.name for family in text_string_to_metric_families(filtered)}
    assert families == {"DCGM_FI_DEV_GPU_UTIL", "gputop_samples"}
    samples = [s for f in text_string_to_metric_families(filtered) for s in f.samples]
    assert samples and {s.name for s in samples} == {"DCGM_FI_DEV_GPU_UTIL", "gputop_samples_total"}
    everything = [s for f in text_string_to_metric_families(whole) for s in f.samples]
    assert len([s for s in everything if s.name == "DCGM_FI_DEV_GPU_UTIL"]) == len(
        [s for s in samples if s.name == "DCGM_FI_DEV_GPU_UTIL"]
    )
    assert nothing == ""  # a name no series has: nothing, as prometheus_client's filter


def test_report_help_says_5_percent_once(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "under 5 % for at least --idle-min" in text and "%%" not in text
