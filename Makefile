# Quick start: `make demo` and `make test`; each creates .venv and installs what it needs.
# `make lint` runs ruff (lint and format check) and mypy. Choose the interpreter or the venv
# on the command line: `make PYTHON=/path/to/python3.13 VENV=.venv-313 demo`.
#
# What a target installs is a published extra of pyproject.toml (demo, forge: what users
# install) or one of its PEP 735 dependency groups (test, lint, docs, bench, reference: the
# project's own pinned tools), installed with `pip install -e . --group NAME`, which needs
# pip 25.1 or newer (a venv with an older pip is upgraded first).
SHELL := /bin/bash

# Taichi 1.7.4 ships wheels for CPython 3.9-3.13 and tiinterp needs 3.10+, so 3.10-3.13.
SUPPORTED := (3, 10) <= sys.version_info[:2] <= (3, 13)
# Take python3 if it is a supported version, else the newest python3.1x that really runs
# (a pyenv shim exists for every installed version, selected or not, and fails when run).
CANDIDATES := python3 python3.13 python3.12 python3.11 python3.10
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell for p in $(CANDIDATES); do \
	$$p -c 'import sys; sys.exit(not ($(SUPPORTED)))' >/dev/null 2>&1 && { echo $$p; exit; }; \
	done; echo python3)
PYTHON_NOTE := none of $(CANDIDATES) is one that runs
else
PYTHON_NOTE := PYTHON=$(PYTHON) is not one
endif
VENV ?= .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install --disable-pip-version-check -q
# The dependency groups of pyproject.toml; any other name after .installed- is an extra.
GROUPS := test lint docs bench reference
# `pip install --group` is new in pip 25.1: a venv made with an older pip (by an older
# Makefile, or by hand) gets a newer one first (a no-op, offline, where pip is new enough).
PIP_FOR_GROUPS := 25.1
PIP_FOR_GROUPS_READY := { $(PIP_INSTALL) 'pip>=$(PIP_FOR_GROUPS)' || { echo "$(VENV): installing \
	the dependency groups needs pip $(PIP_FOR_GROUPS) or newer, and upgrading pip failed:\
	upgrade it, or remove $(VENV) for a new venv" >&2; exit 1; }; }

# The Taichi backend: TAICHI=taichi (1.7.4) or TAICHI=taichi_forge (its maintained fork; the
# `forge` extra is installed too), passed on as TIINTERP_TAICHI. Unset: tiinterp's own
# choice, taichi where it is installed. `make TAICHI=taichi_forge test` tests on the fork.
ifneq ($(TAICHI),)
ifeq ($(filter $(TAICHI),taichi taichi_forge),)
$(error TAICHI: expected taichi or taichi_forge, got $(TAICHI))
endif
export TIINTERP_TAICHI := $(TAICHI)
endif
BACKEND := $(if $(filter taichi_forge,$(TAICHI)),$(VENV)/.installed-forge)

.PHONY: demo kernels test test-env test-simd lint bench stress docs clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if $(SUPPORTED) else "$(PYTHON) is Python " + sys.version.split()[0])' \
		|| { echo "tiinterp needs Python 3.10-3.13 (3.10+ for tiinterp, up to 3.13 for Taichi 1.7.4 wheels) and $(PYTHON_NOTE): install one, or choose one with: make PYTHON=/path/to/python3.x" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade 'pip>=$(PIP_FOR_GROUPS)'

# .installed-NAME: tiinterp, editable, with the dependency group NAME or else the extra NAME.
$(VENV)/.installed-%: pyproject.toml | $(PY)
	$(if $(filter $*,$(GROUPS)),$(PIP_FOR_GROUPS_READY) && $(PIP_INSTALL) -e . --group $*,$(PIP_INSTALL) -e '.[$*]')
	touch $@

demo: $(VENV)/.installed-demo $(BACKEND)
	@$(KERNEL_BUILD) || true
	$(PY) demos/quickstart.py

# The kernel set for this machine (tiinterp/_compiled/: Note [A kernel set's ties]): the
# command line's default mode and the demo's modes (KERNEL_MODES), float32 and float64,
# compiled ahead by llvmlite (the demo extra's) and cc, into ~/.cache/tiinterp/kernel-sets/
# <key> (KERNEL_SET_DIR=... for another folder, then TIINTERP_KERNEL_SET=that folder).
# Taichi 1.7.4 on x86-64/arm64 Linux only; elsewhere `make demo` says so in one line and the
# JIT compiles, as `make kernels` fails with the reason. A set that already holds the modes
# asked for is kept (one line says so).
KERNEL_MODES ?= nearest nearest-exact bilinear bicubic lanczos3
KERNEL_BUILD = $(PY) -m tiinterp._compiled.build --modes $(KERNEL_MODES) --dtypes float32 float64 \
	$(if $(KERNEL_SET_DIR),--out $(KERNEL_SET_DIR))
kernels: $(VENV)/.installed-demo $(BACKEND)
	$(KERNEL_BUILD)

# tools/run_tests.py: with TIINTERP_TEST_ARCHS unset, one pytest process per arch this machine
# has (cpu, and vulkan, cuda or metal where such a device answers: tests/conftest.py's
# choice), the tests that take no arch in the CPU's, as many at a time as there are cores
# (TEST_JOBS=N for another count), each with its own log and Taichi cache under
# build/test-suites (kept: a second run reuses the compiled kernels); it prints what each
# runs, then a summary, and the end of the log of any that failed. With TIINTERP_TEST_ARCHS
# set (`TIINTERP_TEST_ARCHS=cpu make test`, as CI does), one plain pytest run of those archs.
# PYTEST_ARGS go to every pytest run: `make test PYTEST_ARGS="tests/rules/test_validation.py -x"`,
# `make test PYTEST_ARGS='-m "not slow"'`.
test: $(VENV)/.installed-test $(BACKEND)
	$(PY) tools/run_tests.py $(if $(TEST_JOBS),--jobs $(TEST_JOBS)) -- $(PYTEST_ARGS)

# Only the installation `make test` does (CI installs first, then runs two suites at once).
test-env: $(VENV)/.installed-test $(BACKEND)

# The CPU's SIMD configuration (real_matrix_scalarize=False) on what it serves: resizing,
# forward and backward, scalar Taichi pipelines, and the refusals there (grid_sample, vector
# fields: Taichi 1.7.4 miscompiles them in that configuration).
SIMD_TESTS := tests/ops/test_resize_forward.py tests/ops/test_resize_backward.py tests/ops/test_resize_modes.py \
	tests/ops/test_nonfinite.py tests/engine/test_large_batches.py tests/ops/test_pipeline.py \
	tests/kernels/test_simd_configuration.py tests/runtime/test_field_kinds.py
test-simd: $(VENV)/.installed-test $(BACKEND)
	TIINTERP_TEST_ARCHS=cpu-simd $(PY) -m pytest $(SIMD_TESTS) -k "not grid and not vector_field_large_batch" $(PYTEST_ARGS)

# All three run even when one fails, so that one run shows every finding. The format check
# lists the files to reformat (`ruff format` rewrites them) rather than every diff.
lint: $(VENV)/.installed-lint
	@status=0; \
	for check in "ruff check ." "ruff format --check --output-format concise ." "mypy"; do \
		echo "$(PY) -m $$check"; $(PY) -m $$check || status=1; \
	done; exit $$status

# bench.py: tiinterp against PyTorch and JAX (on TAICHI's backend); small_calls.py: small
# calls, first calls in new processes and the command line against PyTorch and PIL;
# backends.py: taichi against taichi-forge, each configuration in a process of its own (so
# both get installed).
bench: $(VENV)/.installed-bench $(VENV)/.installed-forge
	$(PY) benchmarks/bench.py
	$(PY) benchmarks/small_calls.py --output benchmarks/small_calls
	$(PY) benchmarks/backends.py

# What `make test` leaves out, in one pytest run (TIINTERP_STRESS=1) on every available arch
# (or TIINTERP_TEST_ARCHS): the stress tests (tests/stress/: sizes near 2^31, long runs,
# threads, forked workers; ~20 GiB of memory) and the tests whose kernels compile for minutes
# where they do (marker compiles_for_minutes: Vulkan). Their figures go to build/stress.json;
# TIINTERP_STRESS_QUICK=1 runs them at small sizes. PYTEST_ARGS go to pytest. OpenMP's
# threads (torch's) wait passively, 2 of them: idle, they do not spin on Taichi's cores.
stress: $(VENV)/.installed-test $(BACKEND)
	OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-PASSIVE} OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} \
		TIINTERP_STRESS=1 $(PY) -m pytest -m "stress or compiles_for_minutes" $(PYTEST_ARGS)

# The documentation site (mkdocs.yml) into site/; --strict turns every warning, a broken
# link or cross-reference among them, into an error. NO_MKDOCS_2_WARNING silences Material's
# end-of-life banner, which is not about this site.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) .venv-quickstart demos/out site build/test-suites .pytest_cache .mypy_cache .ruff_cache
