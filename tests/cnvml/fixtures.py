"""Pytest fixtures and a runner for the C NVML (docs/c-nvml.md).

Import the fixtures into a test module (``from cnvml.fixtures import c_nvml, ...``). The
libraries are compiled once per test session; the header and the oldest binding are
installed once into a cache (see ``build.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers.real_components import cannot

from cnvml import build
from cnvml.data import write_data_file
from gputop.core.fake import load_scenario

NEWEST = "newest"
OLDEST = "oldest"
BINDINGS = (NEWEST, OLDEST)
"""The binding installed in the virtualenv, and the oldest pyproject.toml allows."""

CLEARED_ENV = ("GPUTOP_FAKE", "GPUTOP_FAKE_TIME", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


@dataclass
class CNvml:
    """The built libraries, one directory (for ``LD_LIBRARY_PATH``) per generation."""

    library_dirs: dict[str, Path]
    work_dir: Path
    _bindings: dict[str, Path | None] = field(default_factory=dict)

    def generation(self, name: str) -> build.Generation:
        return next(g for g in build.GENERATIONS if g.name == name)

    def binding_dir(self, binding: str) -> Path | None:
        """``None`` for the virtualenv's own nvidia-ml-py; the oldest is installed once."""
        if binding == NEWEST:
            return None
        if binding not in self._bindings:
            try:
                version = build.oldest_release(build.declared_binding_floor())
                self._bindings[binding] = build.install_binding(version)
            except build.Unavailable as error:
                cannot(f"the oldest allowed nvidia-ml-py cannot be had: {error}")
        return self._bindings[binding]

    def data_file(
        self,
        name: str,
        scenario: dict[str, Any],
        generation: str,
        *,
        t: float = 30.0,
    ) -> Path:
        """Write ``scenario`` (a scenario document) and its data file for ``generation``.

        The scenario goes through gputop's own loader, so it is checked as any scenario is.
        """
        directory = self.work_dir / "data" / generation
        directory.mkdir(parents=True, exist_ok=True)
        scenario_path = directory / f"{name}.json"
        scenario_path.write_text(json.dumps(scenario), encoding="utf-8")
        gen = self.generation(generation)
        return write_data_file(
            directory / f"{name}.txt",
            load_scenario(scenario_path),
            t,
            driver_version=gen.driver_version,
            nvml_version=gen.nvml_version,
            default_cuda_driver_version=gen.cuda_driver_version,
        )

    def run(
        self, argv: Sequence[str], *, generation: str, binding: str, data: Path
    ) -> subprocess.CompletedProcess[str]:
        """``python <argv>`` with the C NVML of ``generation`` and the chosen binding."""
        return subprocess.run(
            [sys.executable, *argv],
            capture_output=True,
            text=True,
            env=self.environment(generation=generation, binding=binding, data=data),
            cwd=build.REPO,
            timeout=60,
        )

    def environment(self, *, generation: str, binding: str, data: Path) -> dict[str, str]:
        """The environment of a process on the C NVML of ``generation`` and ``binding``."""
        env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
        env["LD_LIBRARY_PATH"] = str(self.library_dirs[generation])
        env["GPUTOP_CNVML_DATA"] = str(data)
        env["GPUTOP_KERNEL_LOG"] = ""  # this machine's kernel log is not the scenario's
        binding_dir = self.binding_dir(binding)
        if binding_dir is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                [str(binding_dir), *filter(None, [env.get("PYTHONPATH")])]
            )
        return env

    def gputop_json(
        self, argv: Sequence[str], *, generation: str, binding: str, data: Path
    ) -> dict[str, Any]:
        """Run ``gputop <argv>`` (a JSON command) on the real backend; fail with its output."""
        result = self.run(
            ["-m", "gputop", *argv], generation=generation, binding=binding, data=data
        )
        assert result.returncode == 0, (
            f"gputop {' '.join(argv)} exited {result.returncode}:\n{result.stderr}"
        )
        document: dict[str, Any] = json.loads(result.stdout)
        return document


@pytest.fixture(scope="session")
def c_nvml(tmp_path_factory: pytest.TempPathFactory) -> CNvml:
    """Every generation's library, compiled against NVIDIA's nvml.h for this session."""
    try:
        include_dir = build.nvml_include_dir()
        build.compiler()
    except build.Unavailable as error:
        cannot(f"the C NVML cannot be built here: {error}")
    out = tmp_path_factory.mktemp("cnvml")
    libraries = {g.name: build.build_library(g, include_dir, out) for g in build.GENERATIONS}
    return CNvml(libraries, out)


@pytest.fixture(scope="module")
def sleepers() -> Iterator[list[int]]:
    """Real processes whose pids the data files list, so psutil reads live /proc entries."""
    processes = [subprocess.Popen(["sleep", "600"]) for _ in range(5)]
    try:
        yield [p.pid for p in processes]
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=10)
