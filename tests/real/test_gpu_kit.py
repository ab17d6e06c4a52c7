"""``make gpu-kit``'s tarball: built for this interpreter and platform, extracted elsewhere,
installed with no index from the tarball alone into a fresh virtualenv, where the real-GPU
suite reports that there is no NVIDIA driver (docs/real-gpu.md).

Building it downloads the wheels once (pip's ordinary client; where no package index answers
the tests skip, or fail under GPUTOP_REQUIRE_REAL); installing it is offline: pip's
configuration is cut off and its index pointed at a closed port. Torch is never in it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from gpu import build_kit, driver
from helpers import REPO
from helpers.real_components import cannot

ROOT = REPO
KIT = "gputop-gpu-kit"
THIS_PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the kit is built for manylinux x86_64 or aarch64")
    out = tmp_path_factory.mktemp("dist") / "kit.tar.gz"
    done = subprocess.run(
        [
            sys.executable, str(ROOT / "tests" / "gpu" / "build_kit.py"),
            "--python-version", THIS_PYTHON,
            "--platform", f"manylinux2014_{platform.machine()}",
            "--out", str(out),
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0 and "['pip', 'download'] failed" in done.stderr:
        tail = " / ".join(done.stderr.strip().splitlines()[-3:])
        cannot(f"the kit's wheels cannot be downloaded here (no package index?): {tail}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"gpu-kit: {out} for CPython {THIS_PYTHON}" in done.stdout
    return out


def offline_env(**more: str) -> dict[str, str]:
    """No pip configuration, no find-links, an index nobody answers."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "GPUTOP_", "VIRTUAL_ENV", "PYTHON"))
    }
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL="http://127.0.0.1:9/simple",
        PIP_NO_CACHE_DIR="1",
        PYTHON=sys.executable,
    )
    if driver.detect().present:  # on a GPU machine, still the no-driver path
        env["GPUTOP_GPU_CHECK_NO_DRIVER"] = "1"
    env.update(more)
    return env


def extract(tarball: Path, into: Path) -> Path:
    into.mkdir()
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        assert all(name == KIT or name.startswith(f"{KIT}/") for name in names), names
        tar.extractall(into, filter="data")
    return into / KIT


def test_kit_holds_gputop_the_suite_and_every_wheel(tarball: Path) -> None:
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
        requirements = tar.extractfile(f"{KIT}/requirements.txt").read().decode().split()
        source = tar.extractfile(f"{KIT}/SOURCE").read().decode()
    wheels = {Path(n).name.split("-")[0].lower() for n in names if n.endswith(".whl")}
    assert {"gputop_dash", "pytest", "pip", "textual", "psutil", "nvidia_ml_py"} <= wheels
    assert "torch" not in wheels
    assert requirements == ["gputop-dash", "pytest>=8"]
    assert source.startswith("gputop_dash-") and " from commit " in source
    for module in ("conftest.py", "compare.py", "cuda_probe.py", "run_check.py", "test_gpu_run.py"):
        assert f"{KIT}/suite/tests/gpu/{module}" in names
    assert f"{KIT}/README.md" in names
    with tarfile.open(tarball) as tar:
        assert tar.getmember(f"{KIT}/run.sh").mode & 0o111


def test_kit_installs_offline_and_the_suite_says_no_driver(tarball: Path, tmp_path: Path) -> None:
    kit = extract(tarball, tmp_path / "a user's kit $HOME")  # quoted everywhere it is used
    report = tmp_path / "report"
    done = subprocess.run(
        [str(kit / "run.sh"), "--report-dir", str(report)],
        capture_output=True, text=True, env=offline_env(), cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "no NVIDIA driver" in output
    assert "nothing was checked" in output
    assert "Traceback" not in output
    assert sum(line.startswith("SKIPPED") for line in output.splitlines()) == 1
    # gputop came from the kit's wheel into the kit's fresh virtualenv, nowhere else
    where = subprocess.run(
        [str(kit / "venv" / "bin" / "python"), "-c", "import gputop; print(gputop.__file__)"],
        capture_output=True, text=True, check=True, env=offline_env(), cwd=tmp_path,
    ).stdout.strip()  # fmt: skip
    assert where.startswith(str(kit / "venv" / "lib")), where
    document = json.loads((report / "gpu-check-report.json").read_text())
    assert document["machine"]["kit"].startswith("gputop_dash-")
    assert document["machine"]["result"].startswith("nothing was checked: no NVIDIA driver")


def test_kit_refuses_another_python_with_a_clear_message(tarball: Path, tmp_path: Path) -> None:
    kit = extract(tarball, tmp_path / "machine")
    (kit / "PYTHON_VERSION").write_text("3.99\n")
    done = subprocess.run(
        [str(kit / "run.sh")], capture_output=True, text=True, env=offline_env(), timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "this kit holds wheels for Python 3.99" in done.stderr
    assert "make gpu-kit KIT_PYTHON=X.Y" in done.stderr
    assert not (kit / "venv").exists()


def test_make_targets_pass_the_interpreter_and_platforms_named() -> None:
    done = subprocess.run(
        [
            "make", "-n", "--no-print-directory", "gpu-kit", "gpu-check", "KIT_PYTHON=3.10",
            "KIT_PLATFORM=manylinux2014_aarch64 manylinux_2_28_aarch64", "KIT_TORCH=1",
            "KIT_NVITOP=", "GPU_CHECK_REPORT=docs/real-gpu/x",
        ],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    commands = " ".join(done.stdout.replace("\\\n", " ").split())
    assert (
        "tests/gpu/build_kit.py --python-version 3.10 --platform manylinux2014_aarch64 "
        "--platform manylinux_2_28_aarch64 --out dist/gputop-gpu-kit.tar.gz --with-torch"
    ) in commands
    assert "--nvitop" not in commands
    assert "tests/gpu/run_check.py --report-dir docs/real-gpu/x" in commands


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--python-version", "banana"], "give a CPython version such as 3.12"),
        (["--platform", "linux x86"], "give a wheel platform tag"),
    ],
)
def test_kit_builder_refuses_bad_input(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        build_kit.main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
