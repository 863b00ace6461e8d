# portalq — `make demo` runs the product, `make test` runs the tests. Both set up
# everything they need (virtualenv, packages, a browser) on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PYTEST_ARGS ?=
# pytest processes: most tests wait on subprocesses, browsers and the server, so a third
# process keeps two cores busy; PYTEST_WORKERS=0 runs the suite in one process
PYTEST_WORKERS ?= 3
PYTEST_N = $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist load)
# extras installed with portalq: the image (deploy/Dockerfile) builds with EXTRAS=console
EXTRAS ?= test
# setup.py maps jobs/, scheduler/, portals/ and migrations/ into portalq (no links): mypy is
# handed each file under its installed name, grimp (lint-imports) reads a copy laid out as
# installed (tools/typecheck.py, tools/package_view.py)
MYPY = $(PY) tools/typecheck.py
LINT_IMPORTS = $(PY) tools/package_view.py $(CURDIR)/$(VENV)/bin/lint-imports --no-cache --config $(CURDIR)/pyproject.toml

.PHONY: help venv browser pgbouncer demo test test-slow test-all lint docs bench bench-browser bench-scale clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.$(if $(EXTRAS),[$(EXTRAS)])'
	touch $@

venv: $(VENV)/.installed  ## create the virtualenv and install portalq with test tools

browser: venv  ## make sure a Chromium exists (Playwright download, else system package)
	@tools/ensure-browser.sh $(PY)

pgbouncer:  ## make sure PgBouncer exists (system package; tests start their own)
	@tools/ensure-pgbouncer.sh

demo: venv browser  ## run the demo: embedded Postgres, stand-in portals, mailbox, service
	$(VENV)/bin/portalq demo

test: venv browser pgbouncer  ## lint, then the test suite (unit, integration, browser, acceptance), not the slow or whole-service (e2e) runs
	$(VENV)/bin/ruff check portalq jobs scheduler portals tests bench tools
	$(LINT_IMPORTS)
	$(MYPY)
	$(MAKE) --no-print-directory docs
	$(PY) -m pytest -q $(PYTEST_N) -m "not slow and not e2e" --durations=15 $(PYTEST_ARGS)

test-slow: venv browser pgbouncer  ## the slow runs: chaos, exactly-once drains, partitions, failover, exhaustive oracle, and the whole service end to end (e2e)
	$(PY) -m pytest -q $(PYTEST_N) -m "slow or e2e" --durations=15 $(PYTEST_ARGS)

test-all: test test-slow  ## everything CI runs

lint: venv  ## ruff + import-layer contracts + mypy
	$(VENV)/bin/ruff check portalq jobs scheduler portals tests bench tools
	$(LINT_IMPORTS)
	$(MYPY)

docs: venv  ## build the documentation site with --strict (generated references checked first)
	$(PY) docs/gen/cli_ref.py --check
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir "$$tmp/site"

# the peers are installed into a venv of the bench's own ($(VENV)-bench), never into portalq's
bench: venv  ## portalq vs PGQueuer vs Procrastinate, same run (bench/peers; N, REPS, LIBS, PGPORT)
	BENCH_VENV=$(abspath $(VENV))-bench PORTALQ_PYTHON=$(abspath $(PY)) $(PY) bench/peers/run.py

bench-browser: venv browser  ## a browser job through portalq vs the same flow as a bare script
	$(PY) bench/browser_bench.py

# the bench's own PostgreSQL under /tmp/pq-bench (port 55436); parts: limit depth bulk history soak plot
SCALE_PARTS ?= all
bench-scale: venv  ## cost as the work grows: 1M waiting, 10M history, soak, bulk, commit limit (vs PGQueuer)
	$(PY) -m pip install -q "pgqueuer==1.6.0" asyncpg matplotlib
	for p in $(SCALE_PARTS); do $(PY) bench/scale_bench.py $$p || exit 1; done

clean:  ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
