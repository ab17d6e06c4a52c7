"""Build the C NVML per driver generation, and fetch what it and the tests need.

NVIDIA's ``nvml.h`` comes from the PyPI package ``nvidia-nvml-dev`` and the oldest allowed
nvidia-ml-py from PyPI, both installed at test time with pip into a cache (never committed);
see docs/c-nvml.md. Each returns ``None`` with a reason when it cannot be had, so the
tests can say why they skip.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SOURCES = tuple(sorted(Path(__file__).parent.glob("cnvml*.c")))
"""cnvml.c (data file, checks, system calls), cnvml_device.c, cnvml_processes.c."""
REPO = Path(__file__).resolve().parents[2]
NVML_DEV = "nvidia-nvml-dev==13.5.37"
"""The header package: the newest nvml.h declares every function a generation exports."""
BINDING = "nvidia-ml-py"
PIP_INSTALL = (sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile")


@dataclass(frozen=True, slots=True)
class Generation:
    """A driver generation the C NVML imitates: what it exports and says it is."""

    name: str
    code: int
    """``CNVML_GEN`` in cnvml.c."""
    driver_version: str
    cuda_driver_version: int

    @property
    def nvml_version(self) -> str:
        major = 11 if self.code < 525 else 12
        return f"{major}.{self.driver_version}"


GENERATIONS = (
    Generation("R460", 460, "460.106.00", 11020),
    Generation("R470", 470, "470.256.02", 11040),
    Generation("R535.54", 535, "535.54.03", 12020),
    Generation("R550", 550, "550.127.05", 12040),
)
"""R460: v1 process calls only; R470 (to R505): _v2; R535.54 (535.43-535.86): _v3 with
32-byte entries; R550: _v3 with 24-byte entries, memory v2, nvmlDeviceGetTemperatureV."""


class Unavailable(Exception):
    """Something the C NVML tests need cannot be had here; the message says what."""


def cache_dir() -> Path:
    """Downloads live next to the virtualenv (or in the user's cache without one)."""
    if sys.prefix != sys.base_prefix and os.access(sys.prefix, os.W_OK):
        base = Path(sys.prefix) / "cache"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = base / "gputop-tests"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One pip install at a time into the cache, across parallel test sessions."""
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _pip_install_target(requirement: str, target: Path) -> None:
    if (target / ".complete").exists():
        return
    shutil.rmtree(target, ignore_errors=True)
    result = subprocess.run(
        [*PIP_INSTALL, "--target", str(target), requirement],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        raise Unavailable(f"pip install {requirement} failed: {result.stderr.strip()[-400:]}")
    (target / ".complete").touch()


def nvml_include_dir() -> Path:
    """The directory holding NVIDIA's nvml.h, installed from nvidia-nvml-dev on first use."""
    cache = cache_dir()
    target = cache / NVML_DEV.replace("==", "-")
    with _locked(cache):
        _pip_install_target(NVML_DEV, target)
    headers = sorted(target.glob("nvidia/*/include/nvml.h")) or sorted(target.rglob("nvml.h"))
    if not headers:
        raise Unavailable(f"{NVML_DEV} installed but has no nvml.h under {target}")
    return headers[0].parent


def compiler() -> str:
    found = shutil.which(os.environ.get("CC", "cc"))
    if found is None:
        raise Unavailable("no C compiler: install gcc (cc) to build the C NVML")
    return found


def build_library(generation: Generation, include_dir: Path, out_dir: Path) -> Path:
    """``<out_dir>/<generation>/libnvidia-ml.so.1``: a directory for ``LD_LIBRARY_PATH``."""
    directory = out_dir / generation.name
    directory.mkdir(parents=True, exist_ok=True)
    library = directory / "libnvidia-ml.so.1"
    command = [compiler(), "-shared", "-fPIC", "-O1", "-std=c11", "-D_DEFAULT_SOURCE"]
    command += ["-Wall", "-Werror", "-Wno-deprecated-declarations", "-fvisibility=hidden"]
    command += [f"-DCNVML_GEN={generation.code}", f"-I{include_dir}", *map(str, SOURCES)]
    command += ["-o", str(library)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"building the C NVML for {generation.name} failed:\n{result.stderr}")
    return directory


def declared_binding_floor(pyproject: Path = REPO / "pyproject.toml") -> str:
    """The lowest nvidia-ml-py gputop declares it works with, as written in pyproject.toml."""
    match = re.search(r'"nvidia-ml-py\s*>=\s*([0-9][0-9.]*)', pyproject.read_text("utf-8"))
    if match is None:
        raise RuntimeError(f"{pyproject} declares no 'nvidia-ml-py>=' floor")
    return match.group(1)


def oldest_release(floor: str) -> str:
    """The oldest nvidia-ml-py release at or above ``floor`` (``12.535`` -> ``12.535.77``)."""
    if floor.count(".") >= 2:
        return floor
    from packaging.version import Version

    result = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", BINDING, "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    match = re.search(r"Available versions: (.*)", result.stdout)
    if result.returncode != 0 or match is None:
        raise Unavailable(f"cannot list {BINDING} releases: {result.stderr.strip()[-400:]}")
    releases = [Version(v.strip()) for v in match.group(1).split(",")]
    allowed = [v for v in releases if v >= Version(floor)]
    if not allowed:
        raise Unavailable(f"no {BINDING} release at or above {floor}")
    return str(min(allowed))


def install_binding(version: str) -> Path:
    """A directory holding ``pynvml.py`` of nvidia-ml-py ``version``, for ``PYTHONPATH``."""
    cache = cache_dir()
    target = cache / f"{BINDING}-{version}"
    with _locked(cache):
        _pip_install_target(f"{BINDING}=={version}", target)
    if not (target / "pynvml.py").exists():
        raise Unavailable(f"{BINDING}=={version} installed but has no pynvml.py")
    return target
