# gputop: every target creates the virtualenv and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo run test check bench screenshots clean dist gpu-check gpu-kit

# The distribution was named gputop until it became gputop-dash (README, Install): an
# editable install under the old name is removed, so one name owns the gputop command.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip uninstall --quiet --disable-pip-version-check -y gputop 2>/dev/null || true
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

## make demo: the dashboard on simulated GPUs (no NVIDIA driver needed)
demo: $(STAMP)
	@echo "gputop is installed in .venv: the command is $(BIN)/gputop (README, Start here)."
	$(BIN)/gputop --fake demo
	@echo "Again: $(BIN)/gputop --fake demo   (every command: $(BIN)/gputop --help)"

## make run: the dashboard on this machine's real GPUs
run: $(STAMP)
	$(BIN)/gputop

## make test: lint, the import contract and the test suite, on TEST_WORKERS processes
## (pytest-xdist, each test file whole on one of them: docs/testing.md): twice the CPUs,
## at most 4; make test TEST_WORKERS=0 runs them in this one process.
CPUS := $(shell nproc 2>/dev/null || echo 1)
TEST_WORKERS ?= $(shell n=$$(( $(CPUS) * 2 )); [ $$n -gt 4 ] && n=4; echo $$n)
## The tests start gputop in hundreds of processes: its bytecode is compiled once first, or
## where PYTHONDONTWRITEBYTECODE is set (a fresh clone) each process compiles what it
## imports again (0.5 s of CPU for the dashboard's modules). Likewise pytest's rewritten test
## files, which every worker would otherwise make again as it collects (docs/testing.md); a
## file that does not collect is reported by the run after.
test: $(STAMP)
	$(BIN)/ruff check gputop tests
	$(BIN)/ruff format --check gputop tests
	$(BIN)/lint-imports
	$(BIN)/python -m compileall -q gputop tests
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest --collect-only -qq -p no:cacheprovider >/dev/null 2>&1 || true
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

## make check: lint and type-check
check: $(STAMP)
	$(BIN)/ruff check gputop tests
	$(BIN)/mypy

## make bench: start-up, CPU, bytes, memory and key latency on dgx-h100 with 200 live
## processes and a recorder's store, beside a bare Textual app and nvitop (pinned, in its own
## virtualenv .venv-nvitop: never a dependency of gputop; NVITOP_PYTHON= names another Python
## that has it); the same on the busy server (--busy: every reading moving each second, each
## process with its own CUDA_VISIBLE_DEVICES; docs/speed.md); then the history and the
## exporter benches on the same scenario, and the fleet's (200 nodes from a real Prometheus:
## snapshot --prometheus, and the fleet dashboard beside the local one; docs/fleet.md).
## Every bench runs; it fails if one missed a target
NVITOP_VERSION := 1.7.2
NVITOP_VENV ?= .venv-nvitop
NVITOP_PYTHON ?= $(NVITOP_VENV)/bin/python
NVITOP_STAMP := $(NVITOP_VENV)/.installed-$(NVITOP_VERSION)

$(NVITOP_STAMP):
	test -x $(NVITOP_VENV)/bin/python || $(PYTHON) -m venv $(NVITOP_VENV)
	$(NVITOP_VENV)/bin/python -m pip install --quiet --disable-pip-version-check 'nvitop==$(NVITOP_VERSION)'
	touch $(NVITOP_STAMP)

bench: $(STAMP) $(if $(filter $(NVITOP_VENV)/bin/python,$(NVITOP_PYTHON)),$(NVITOP_STAMP))
	status=0; \
	$(BIN)/python tests/bench/dashboard_bench.py --nvitop $(NVITOP_PYTHON) || status=1; \
	$(BIN)/python tests/bench/dashboard_bench.py --busy --nvitop $(NVITOP_PYTHON) || status=1; \
	$(BIN)/python tests/bench/history_bench.py || status=1; \
	$(BIN)/python tests/bench/exporter_bench.py || status=1; \
	$(BIN)/python tests/bench/fleet_bench.py || status=1; \
	$(BIN)/python tests/bench/fleet_dashboard_bench.py || status=1; \
	$(BIN)/python tests/bench/health_bench.py || status=1; \
	exit $$status

## make dist: the sdist and the wheel of gputop-dash in dist/ (README, Install)
dist: $(STAMP)
	rm -rf dist build
	$(BIN)/python -m build --outdir dist .

clean:
	rm -rf $(VENV) $(NVITOP_VENV) .pytest_cache .mypy_cache .ruff_cache dist build

## make screenshots: regenerate the SVGs in screenshots/ from the built-in scenarios
screenshots: $(STAMP)
	$(BIN)/python -m gputop.tui.screenshots screenshots

## make gpu-check: on a machine with an NVIDIA driver, the real-GPU suite (tests/gpu,
## docs/real-gpu.md): gputop against nvidia-smi and a CUDA process of its own; writes
## gpu-check-report.md and .json in GPU_CHECK_REPORT (default docs/real-gpu/DATE-MACHINE,
## to be committed). Without a driver it says so once, checks nothing, and writes its report
## in build/gpu-check (ignored).
GPU_CHECK_REPORT ?=
gpu-check: $(STAMP)
	$(BIN)/python tests/gpu/run_check.py $(if $(GPU_CHECK_REPORT),--report-dir $(GPU_CHECK_REPORT))

## make gpu-kit: dist/gputop-gpu-kit.tar.gz, to run that suite on a GPU machine without
## network: gputop's wheel, every wheel it and the suite need for CPython KIT_PYTHON on
## KIT_PLATFORM, nvitop KIT_NVITOP beside it, torch with KIT_TORCH=1, and run.sh
## (docs/real-gpu.md)
KIT_PYTHON ?= 3.12
KIT_PLATFORM ?= manylinux2014_x86_64
KIT_NVITOP ?= $(NVITOP_VERSION)
gpu-kit: $(STAMP)
	$(BIN)/python tests/gpu/build_kit.py --python-version $(KIT_PYTHON) \
		$(foreach p,$(KIT_PLATFORM),--platform $(p)) --out dist/gputop-gpu-kit.tar.gz \
		$(if $(KIT_NVITOP),--nvitop $(KIT_NVITOP)) $(if $(KIT_TORCH),--with-torch)
