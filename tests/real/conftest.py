"""Tests that start a real component: sshd, a one-node Slurm cluster, Prometheus and the
exporter as a server, the C NVML and the C libcuda (a C compiler), torch, tmux, git, small
file systems mounted for the test (docs/testing.md lists the files). Without a component a
test skips saying why, or fails under GPUTOP_REQUIRE_REAL=1 (CI).

The Slurm cluster is started once per test session (per xdist worker); the C NVML's fixtures
come from tests/cnvml/fixtures.py through the root conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import small_filesystems
from helpers.slurm_cluster import SlurmCluster, cluster_for_test, session_cluster


@pytest.fixture(scope="session", name="slurm_cluster")
def slurm_cluster_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A real one-node Slurm cluster with four simulated cards, once per session."""
    yield from session_cluster(tmp_path_factory)


@pytest.fixture(name="slurm")
def slurm_fixture(
    slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SlurmCluster]:
    """The cluster, ``SLURM_CONF`` set for this test, and no job left over afterwards."""
    yield from cluster_for_test(slurm_cluster, monkeypatch)


@pytest.fixture(name="small_state_dir")
def small_state_dir_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state directory on its own 4 MiB tmpfs; the test's environment points at it."""
    yield from small_filesystems.small_state_dir(tmp_path, monkeypatch)


@pytest.fixture(name="read_only_view")
def read_only_view_fixture(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(source, view): ``view`` shows ``source`` through a read-only bind mount."""
    yield from small_filesystems.read_only_view(tmp_path)
