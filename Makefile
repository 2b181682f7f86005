# Quick start: `make demo` and `make test`; each creates .venv and installs what it needs.
SHELL := /bin/bash
# Taichi 1.7 ships wheels for CPython 3.10-3.12: take the first of those that really runs
# (a pyenv shim can exist for a version that is not selected).
PYTHON ?= $(shell for p in python3 python3.12 python3.11 python3.10; do \
	$$p -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 12))' >/dev/null 2>&1 \
	&& { echo $$p; exit; }; done; echo python3)
VENV := .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install --disable-pip-version-check -q

.PHONY: demo test bench stress clean

$(PY):
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if (3, 10) <= v <= (3, 12) else "tiinterp needs Python 3.10-3.12 (Taichi 1.7 wheels), got " + sys.version)'
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip

$(VENV)/.installed-%: pyproject.toml | $(PY)
	$(PIP_INSTALL) -e '.[$*]'
	touch $@

demo: $(VENV)/.installed-demo
	$(PY) demos/quickstart.py

test: $(VENV)/.installed-test
	$(PY) -m pytest

bench: $(VENV)/.installed-bench
	$(PY) benchmarks/bench.py

stress: $(VENV)/.installed-test
	$(PY) benchmarks/stress.py

clean:
	rm -rf $(VENV) demos/out .pytest_cache
