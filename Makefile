# Two commands on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
# Django 6 needs Python >= 3.12: the first one found wins.
PYTHON ?= $(shell for p in python3.13 python3.12 /root/.pyenv/versions/3.13*/bin/python3 /root/.pyenv/versions/3.12*/bin/python3 python3; do \
	  command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { command -v $$p; break; }; done)
PYTEST_ARGS ?=
TEST_VAR ?= var/test

# Translation catalogues: the .po files are committed, the .mo files are built from them.
PO_FILES := $(wildcard locale/*/LC_MESSAGES/*.po)
MO_FILES := $(PO_FILES:.po=.mo)
LOCALES ?= zh_Hans
# makemessages only reads settings; these addresses are never dialled.
NO_SERVERS := DATABASE_URL=$${DATABASE_URL:-postgres://localhost/unused} REDIS_URL=$${REDIS_URL:-redis://localhost/0}

.PHONY: run test test-integration services stop lint soak bench bench-assistant bench-contention bench-runtime bench-cpu bench-load bench-chaos bench-profile bench-trace bench-peers venv clean compilemessages messages

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.12+ is required (Django 6)."; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $@

venv: $(VENV)/.installed

# The peers of bench/peers.py (LangGraph, DBOS, the OpenAI Agents SDK): a benchmark extra of
# pyproject.toml, installed into the venv only for the benchmarks, never a product dependency.
$(VENV)/.installed-bench-peers: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet -e '.[test,bench-peers]'
	@touch $@

run: venv compilemessages
	$(PY) -m config.run

# The whole suite against fresh, throwaway embedded servers (or DATABASE_URL/REDIS_URL if set).
test: venv compilemessages
	$(PY) -m config.devservers exec --var $(TEST_VAR) --fresh --fast -- $(PY) -m pytest $(PYTEST_ARGS)

# Only the tests marked `integration`, e.g. against the machine's own servers.
test-integration: venv compilemessages
	$(PY) -m config.devservers exec --var $(TEST_VAR) --fresh --fast -- $(PY) -m pytest -m integration $(PYTEST_ARGS)

services: venv
	$(PY) -m config.devservers up

stop: venv
	$(PY) -m config.devservers down

# A .mo is rebuilt whenever its .po is newer (or it is missing), by GNU gettext's msgfmt as
# Django's compilemessages runs it, but without settings or servers; a running server never
# reads a half-written file.
%.mo: %.po
	@command -v msgfmt >/dev/null || { echo "msgfmt not found: install GNU gettext (apt-get install gettext)."; exit 1; }
	msgfmt --check-format -o $@.tmp $< && mv $@.tmp $@

compilemessages: $(MO_FILES)

# Re-extract the strings of templates and code into the .po files (then translate the new
# msgstr entries; the build compiles them).
messages: venv
	$(NO_SERVERS) $(PY) manage.py makemessages $(addprefix -l ,$(LOCALES)) --ignore=.venv --ignore=var --ignore=bench --ignore=tests --add-location=file --no-wrap
	$(MAKE) compilemessages

# ruff, then the import-linter contracts of pyproject.toml that keep the layout honest, then
# mypy with django-stubs ([tool.mypy]; its plugin imports the settings, which dial no server).
lint: venv
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/lint-imports
	$(NO_SERVERS) $(VENV)/bin/mypy

# Every benchmark listed in bench/report.py, each on fresh embedded servers of its own; one
# report: var/bench/report.json and the table bench/REPORT.md (BENCH_ONLY=load,chaos for some).
bench: venv $(VENV)/.installed-bench-peers
	$(PY) bench/report.py

# The assistant's evaluation set on fresh servers: understood / wrong / asked per language, pass^k.
bench-assistant: venv compilemessages
	$(PY) -m config.devservers exec --var var/bench-assistant --fresh --fast -- $(PY) bench/assistant_eval.py $(BENCH_ARGS)

bench-contention: venv
	$(PY) -m config.devservers exec --var var/bench-contention --fresh --fast -- $(PY) bench/booking_contention.py

bench-runtime: venv
	$(PY) -m config.devservers exec --var var/bench-runtime --fresh --fast -- $(PY) bench/runtime_overhead.py

bench-cpu: venv
	$(PY) -m config.devservers exec --var var/bench-cpu --fresh --fast -- $(PY) bench/cpu_probe.py

bench-load: venv
	$(PY) -m config.devservers exec --var var/bench-load --fresh --fast -- $(PY) bench/load.py $(BENCH_ARGS)

bench-chaos: venv
	$(PY) -m config.devservers exec --var var/bench-chaos --fresh --fast -- $(PY) bench/chaos.py

# Not part of CI: at least 1,000 seeded chaos trials over every fault the suite knows, with two
# more processes keeping the CPU busy; prints the invariants (all must be 0) as JSON, keeps them
# in bench/soak.json and puts them in bench/REPORT.md's soak section. Then the booking state
# machine's model-based test (tests/bookings/test_state_machine.py) at a large size: make test
# runs it at 20 sequences of 30 steps, the soak at SOAK_MODEL_EXAMPLES of SOAK_MODEL_STEPS.
SOAK_TRIALS ?= 1000
SOAK_LOAD ?= 2
SOAK_MODEL_EXAMPLES ?= 500
SOAK_MODEL_STEPS ?= 60
soak: venv
	$(PY) -m config.devservers exec --var var/soak --fresh --fast -- $(PY) bench/chaos.py --total-trials $(SOAK_TRIALS) --load $(SOAK_LOAD) --out bench/soak.json; \
	status=$$?; $(PY) bench/report.py --soak; \
	BOOKING_MODEL_EXAMPLES=$(SOAK_MODEL_EXAMPLES) BOOKING_MODEL_STEPS=$(SOAK_MODEL_STEPS) \
	  $(PY) -m config.devservers exec --var var/soak-model --fresh --fast -- $(PY) -m pytest -p no:cacheprovider tests/bookings/test_state_machine.py || status=1; \
	exit $$status

# The product against LangGraph, DBOS, the OpenAI Agents SDK and bare psycopg on the same
# two-call booking (bench/README.md); var/bench/peers.json, then bench/REPORT.md's peers section.
bench-peers: $(VENV)/.installed-bench-peers
	$(PY) -m config.devservers exec --var var/bench-peers --fresh --fast -- $(PY) bench/peers.py $(BENCH_ARGS); \
	status=$$?; $(PY) bench/report.py --peers; exit $$status

bench-profile: venv
	$(PY) -m config.devservers exec --var var/bench-profile --fresh --fast -- $(PY) bench/profile_run.py

bench-trace: venv
	$(PY) -m config.devservers exec --var var/bench-trace --fresh --fast -- $(PY) bench/trace_latency.py

clean:
	rm -rf var
