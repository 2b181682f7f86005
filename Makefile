# Quick start: `make demo` and `make test`; each creates .venv and installs what it needs.
SHELL := /bin/bash
# Taichi 1.7 ships wheels for CPython 3.10-3.12: take the newest of those that is installed.
PYTHON ?= $(shell for p in python3.12 python3.11 python3.10 python3; do \
	command -v $$p >/dev/null 2>&1 && { echo $$p; break; }; done)
VENV := .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install --disable-pip-version-check -q

.PHONY: demo test bench clean

$(PY):
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "tiinterp needs Python >= 3.10, got " + sys.version'
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip

$(VENV)/.installed-%: pyproject.toml | $(PY)
	$(PIP_INSTALL) -e '.[$*]'
	touch $@

demo: $(VENV)/.installed-demo
	$(PY) demos/quickstart.py

test: $(VENV)/.installed-test
	$(PY) -m pytest

clean:
	rm -rf $(VENV) demos/out .pytest_cache
