#!/bin/sh
# gputop's real-GPU check from this kit, offline (docs/real-gpu.md in README.md here):
#   ./run.sh [--report-dir DIR] [PYTEST ARGS...]
# Makes a fresh virtualenv (./venv, or $KIT_VENV), installs gputop and the suite from
# ./wheels alone (pip install --no-index), runs the suite, writes gpu-check-report.md and
# .json in DIR (default: the current directory). PYTHON=/path/to/python picks the interpreter.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
want=$(cat "$here/PYTHON_VERSION")
version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true; }
described() {  # what the interpreter $1 is, in words, named $2
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "there is no $2"
    elif [ -n "$(version_of "$1")" ]; then
        echo "$2 is Python $(version_of "$1")"
    else
        echo "$2 does not run"
    fi
}
python=${PYTHON:-}
if [ -z "$python" ]; then
    for candidate in "python$want" python3; do
        if command -v "$candidate" >/dev/null 2>&1 && [ "$(version_of "$candidate")" = "$want" ]; then
            python=$candidate
            break
        fi
    done
fi
if [ -z "$python" ] || [ "$(version_of "$python")" != "$want" ]; then
    if [ -n "${PYTHON:-}" ]; then
        what=$(described "$PYTHON" "PYTHON=$PYTHON")
    else  # "there is no python3.12, and python3 is Python 3.11"
        what="$(described "python$want" "python$want"), and $(described python3 python3)"
    fi
    echo "run.sh: this kit holds wheels for Python $want: $what." >&2
    echo "run.sh: set PYTHON=/path/to/python$want, or build a kit for this machine's Python: make gpu-kit KIT_PYTHON=X.Y" >&2
    exit 2
fi
venv=${KIT_VENV:-$here/venv}
pip_wheel=$(ls "$here"/wheels/pip-*.whl | head -n 1)
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv --without-pip "$venv"
fi
"$venv/bin/python" "$pip_wheel/pip" install --quiet --disable-pip-version-check --no-index \
    --find-links "$here/wheels" -r "$here/requirements.txt"
if [ -d "$here/wheels-nvitop" ]; then
    # nvitop, to compare the dashboards' CPU, in a virtualenv of its own (never gputop's)
    if [ ! -x "$here/venv-nvitop/bin/nvitop" ]; then
        "$python" -m venv --without-pip "$here/venv-nvitop"
        "$here/venv-nvitop/bin/python" "$pip_wheel/pip" install --quiet --disable-pip-version-check \
            --no-index --find-links "$here/wheels-nvitop" nvitop || echo "run.sh: nvitop did not install; its CPU is not measured" >&2
    fi
    if [ -x "$here/venv-nvitop/bin/nvitop" ]; then
        NVITOP="$here/venv-nvitop/bin/nvitop"
        export NVITOP
    fi
fi
GPUTOP_GPU_KIT=$(cat "$here/SOURCE")
export GPUTOP_GPU_KIT
exec "$venv/bin/python" "$here/suite/tests/gpu/run_check.py" "$@"
