"""``make gpu-kit``: the real-GPU suite and every wheel it needs, for a machine without network.

    python tests/gpu/build_kit.py [--python-version 3.12] [--platform manylinux2014_x86_64]
                                  [--out dist/gputop-gpu-kit.tar.gz] [--nvitop VERSION]
                                  [--with-torch]

Writes a tarball holding ``gputop-gpu-kit/``: ``wheels/`` (gputop's own wheel, built from
this checkout, and the wheels of everything it and the suite need, for the interpreter and
platform named: ``pip download --only-binary=:all:``), ``suite/`` (tests/gpu), and
``run.sh``, which makes a fresh virtualenv, installs from ``wheels/`` alone
(``pip install --no-index``) and runs the suite. docs/real-gpu.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
KIT = "gputop-gpu-kit"
SUITE_NEEDS = ("pytest>=8",)
"""What the suite imports beyond gputop and its dependencies (psutil comes with gputop)."""

RUN_SH = HERE / "kit_run.sh"
"""The kit's ``run.sh``."""

PYTEST_INI = """[pytest]
testpaths = tests
addopts = -ra
"""


def version_text(text: str) -> str:
    if not re.fullmatch(r"3\.\d{1,2}", text):
        raise argparse.ArgumentTypeError(f"{text!r}: give a CPython version such as 3.12")
    return text


def platform_tag(text: str) -> str:
    if not re.fullmatch(r"[a-z0-9_]+", text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a wheel platform tag such as manylinux2014_x86_64"
        )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python-version", type=version_text, default="3.12")
    parser.add_argument(
        "--platform",
        type=platform_tag,
        action="append",
        help="a wheel platform tag; repeat for several (default manylinux2014_x86_64)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / f"{KIT}.tar.gz")
    parser.add_argument("--nvitop", metavar="VERSION", help="add nvitop==VERSION, for its CPU")
    parser.add_argument("--with-torch", action="store_true", help="add torch (gigabytes)")
    parser.add_argument("--wheel", type=Path, help="gputop's wheel, already built")
    args = parser.parse_args(argv)
    platforms = args.platform or ["manylinux2014_x86_64"]
    with tempfile.TemporaryDirectory(prefix="gputop-kit-") as work:
        kit = Path(work) / KIT
        wheels = kit / "wheels"
        wheels.mkdir(parents=True)
        own = args.wheel or build_wheel(Path(work))
        shutil.copy2(own, wheels / own.name)
        requirements = [own.name.split("-")[0].replace("_", "-"), *SUITE_NEEDS]
        if args.with_torch:
            requirements.append("torch")
        download(wheels, [str(wheels / own.name), *requirements[1:], "pip"], args, platforms)
        if args.nvitop:
            download(kit / "wheels-nvitop", [f"nvitop=={args.nvitop}"], args, platforms)
        (kit / "requirements.txt").write_text("\n".join(requirements) + "\n")
        (kit / "PYTHON_VERSION").write_text(args.python_version + "\n")
        (kit / "SOURCE").write_text(source_line(own.name) + "\n")
        suite = kit / "suite"
        shutil.copytree(
            HERE,
            suite / "tests" / "gpu",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "kit_run.sh", "build_kit.py"),
        )
        (suite / "pytest.ini").write_text(PYTEST_INI)
        shutil.copy2(RUN_SH, kit / "run.sh")
        (kit / "run.sh").chmod(0o755)
        guide = ROOT / "docs" / "real-gpu.md"
        if guide.exists():
            shutil.copy2(guide, kit / "README.md")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        part = args.out.with_name(args.out.name + ".part")
        with tarfile.open(part, "w:gz") as tar:
            tar.add(kit, arcname=KIT)
        os.replace(part, args.out)
        count = len(list(wheels.glob("*.whl")))
    print(
        f"gpu-kit: {args.out} for CPython {args.python_version} on {', '.join(platforms)} "
        f"({count} wheels); on the GPU machine: tar xzf {args.out.name} && {KIT}/run.sh"
    )
    return 0


def source_line(wheel: str) -> str:
    """What the kit was built from, for the report: the wheel, the commit, a date."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"{wheel} from commit {commit or 'unknown'}, built {stamp}"


def build_wheel(work: Path) -> Path:
    """gputop's wheel from a copy of this checkout (nothing written into it), offline."""
    source = work / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv*", ".git", "*.egg-info", "build", "dist", "tests", "__pycache__"
        ),
    )
    out = work / "own"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out), str(source),
        ],
        check=True,
    )  # fmt: skip
    return next(out.glob("*.whl"))


def download(
    folder: Path, requirements: list[str], args: argparse.Namespace, platforms: list[str]
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
        "--only-binary=:all:", "--implementation", "cp", "--python-version", args.python_version,
        "--dest", str(folder),
    ]  # fmt: skip
    for platform in platforms:
        command += ["--platform", platform]
    subprocess.run([*command, *requirements], check=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as error:
        print(f"gpu-kit: {error.cmd[2:4]} failed with status {error.returncode}", file=sys.stderr)
        sys.exit(1)
