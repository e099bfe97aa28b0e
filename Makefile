# Two commands on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
# Django 6 needs Python >= 3.12: the first one found wins.
PYTHON ?= $(shell for p in python3.13 python3.12 /root/.pyenv/versions/3.13*/bin/python3 /root/.pyenv/versions/3.12*/bin/python3 python3; do \
	  command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { command -v $$p; break; }; done)
PYTEST_ARGS ?=
TEST_VAR ?= var/test

.PHONY: run test test-integration services stop lint bench bench-contention bench-runtime bench-cpu bench-profile venv clean

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.12+ is required (Django 6)."; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $@

venv: $(VENV)/.installed

run: venv
	$(PY) -m config.run

# The whole suite against fresh, throwaway embedded servers (or DATABASE_URL/REDIS_URL if set).
test: venv
	$(PY) -m config.devservers exec --var $(TEST_VAR) --fresh --fast -- $(PY) -m pytest $(PYTEST_ARGS)

# Only the tests marked `integration`, e.g. against the machine's own servers.
test-integration: venv
	$(PY) -m config.devservers exec --var $(TEST_VAR) --fresh --fast -- $(PY) -m pytest -m integration $(PYTEST_ARGS)

services: venv
	$(PY) -m config.devservers up

stop: venv
	$(PY) -m config.devservers down

lint: venv
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: bench-contention bench-runtime

bench-contention: venv
	$(PY) -m config.devservers exec --var var/bench-contention --fresh --fast -- $(PY) bench/booking_contention.py

bench-runtime: venv
	$(PY) -m config.devservers exec --var var/bench-runtime --fresh --fast -- $(PY) bench/runtime_overhead.py

bench-cpu: venv
	$(PY) -m config.devservers exec --var var/bench-cpu --fresh --fast -- $(PY) bench/cpu_probe.py

bench-profile: venv
	$(PY) -m config.devservers exec --var var/bench-profile --fresh --fast -- $(PY) bench/profile_run.py

clean:
	rm -rf var
