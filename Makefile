# `make run` sets everything up and serves the API with demo data; `make test` installs and runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# What is installed, each stamp newer than pyproject.toml: the runtime dependencies (`make run`, `make serve`), or
# those and the `dev` extra (tests, lint, fuzzing, benchmarks).
RUNTIME := $(VENV)/.installed-runtime
DEV := $(VENV)/.installed-dev
HOST ?= 127.0.0.1
PORT ?= 8000
# Links in emails and in what `make run` prints point at the server it starts.
SITE_URL ?= http://$(HOST):$(PORT)
# When make began, so that `make run` can say how long its first answer took from there (GNU date; elsewhere, seconds).
STARTED := $(shell date +%s.%N)
# Each install step says how long it took (scripts/timed.sh), as scripts/run.sh's steps do.
TIMED := scripts/timed.sh

.PHONY: install install-dev run serve test lint format bench schema fuzz clean

# A current pip resolves these dependencies two to three times as fast as the one a new virtualenv comes with. The
# system's pip installs it into a virtualenv made without pip where it can (pip 22.3 or later: --python), which skips
# installing the bundled pip (and setuptools) only to replace it; else the virtualenv gets the bundled pip, which
# upgrades itself. Modules are compiled when first imported rather than all at install time (--no-compile): quicker,
# and a smaller .venv.
$(PY):
	$(TIMED) "the virtualenv" $(PYTHON) -m venv --without-pip $(VENV)
	$(TIMED) "a current pip" sh -c '$(PYTHON) -m pip --python $(PY) install --quiet --upgrade pip 2>/dev/null || \
		{ $(PYTHON) -m venv $(VENV) && $(PY) -m pip install --quiet --upgrade pip; }'

$(RUNTIME): pyproject.toml | $(PY)
	$(TIMED) "the runtime dependencies' install" $(PY) -m pip install --quiet --no-compile -e .
	touch $(RUNTIME)

# The dev extra holds the runtime dependencies too, so its install brings the runtime stamp up to date as well.
$(DEV): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --no-compile -e ".[dev]"
	touch $(RUNTIME) $(DEV)

# Embedded ClickHouse (chDB, half a gigabyte) for a chdb:// CLICKHOUSE_URL: `make run` adds it for such a URL only.
CHDB := $(VENV)/.installed-chdb
$(CHDB): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --no-compile -e ".[chdb]"
	touch $(RUNTIME) $(CHDB)

install: $(RUNTIME)

install-dev: $(DEV)

# Temporal's development server, a batch-export worker, the sender of invite mails, the events sync with CLICKHOUSE_URL
# set, and the web server (scripts/run.sh); Ctrl-C stops them all.
run: install $(if $(filter chdb:%,$(CLICKHOUSE_URL)),$(CHDB))
	SITE_URL=$(SITE_URL) HOST=$(HOST) PORT=$(PORT) PY=$(PY) MAKE_RUN_STARTED=$(STARTED) scripts/run.sh

# Production: DEBUG off (SECRET_KEY and ALLOWED_HOSTS required), migrations, static files, gunicorn with
# gunicorn.conf.py on $(HOST):$(PORT) (scripts/serve.sh).
serve: install
	HOST=$(HOST) PORT=$(PORT) scripts/serve.sh

test: install-dev
	$(PY) -m pytest

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# DATABASE_URL names a scratch PostgreSQL database that is dropped and recreated (its name must contain "bench";
# default postgres://postgres@127.0.0.1:5432/workspace_bench). Flags in BENCH_ARGS, e.g.
# BENCH_ARGS="--scale 0.1 --duration 3" for a quick run; BENCH_ARGS="--engine clickhouse" for the events sync and the
# queries on PostgreSQL and ClickHouse (chDB) side by side at 10M events (--scale 0.01 for a quick one). Not part of
# `make test`.
bench: install-dev
	$(PY) benchmarks/run.py $(BENCH_ARGS)

schema: install
	$(PY) manage.py spectacular --validate --fail-on-warn --file /dev/null

# Schemathesis against a throwaway copy of the service (scripts/fuzz.sh, schemathesis.toml): every check and method,
# OPTIONS and HEAD included. SQLite by default; CI runs it on PostgreSQL, whose row locks and transaction rules are
# production's, with FUZZ_DATABASE_URL=postgres://postgres@127.0.0.1:5432/workspace_fuzz. Extra flags via FUZZ_ARGS.
fuzz: install-dev
	scripts/fuzz.sh $(FUZZ_ARGS)

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
