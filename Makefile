# memvault: `make run` starts memvault on its embedded default, `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_VAULT ?= demo-vault
STAMP := $(VENV)/.installed
# The real OpenClaw and the Node 24 it needs, for the end-to-end tests (npm registry only;
# its install scripts are skipped: they refuse the system's Node before ours is on PATH).
OPENCLAW_DIR := $(VENV)/openclaw
OPENCLAW_STAMP := $(OPENCLAW_DIR)/.installed

.PHONY: install openclaw postgres run test lint typecheck pytest bench bench-quick bench-qa screenshots docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev,postgres]"
# The local model's ONNX file, exported once, so no first search waits for it.
	$(BIN)/memvault embedder prepare
	touch $(STAMP)

install: $(STAMP)

$(OPENCLAW_STAMP): tests/openclaw/npm/package.json tests/openclaw/npm/package-lock.json
	command -v npm >/dev/null || (apt-get update -qq && apt-get install -y -qq npm)
	mkdir -p $(OPENCLAW_DIR)
	cp tests/openclaw/npm/package.json tests/openclaw/npm/package-lock.json $(OPENCLAW_DIR)/
	cd $(OPENCLAW_DIR) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(OPENCLAW_STAMP)

openclaw: $(OPENCLAW_STAMP)

run: $(STAMP)
	@bash scripts/demo.sh "$(DEMO_VAULT)"

lint: $(STAMP)
	$(BIN)/ruff format --check src tests bench
	$(BIN)/ruff check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict src/memvault

# The tests' PostgreSQL: the wheel's server with a pgvector compiled here from Debian's
# source package for any x86-64 processor (tests/pg_server.py says why).
PG_DIR := $(VENV)/pg
PG_STAMP := $(PG_DIR)/.installed

$(PG_STAMP): $(STAMP) scripts/build_test_postgres.sh
	command -v gcc >/dev/null && command -v make >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq gcc make libc6-dev)
	bash scripts/build_test_postgres.sh $(BIN)/python $(PG_DIR)
	touch $(PG_STAMP)

postgres: $(PG_STAMP)

# The email channel's tests run a real IMAP server (Debian's dovecot) and make certificates,
# the service tests check units with systemd-analyze;
# the console's tests drive Debian's chromium (never `playwright install`).
DEBIAN_STAMP := $(VENV)/.debian

# Made again when this file changes: a package added here reaches an existing venv.
$(DEBIAN_STAMP): Makefile
	command -v dovecot >/dev/null && command -v openssl >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq dovecot-imapd openssl)
	command -v systemd-analyze >/dev/null || (apt-get update -qq && apt-get install -y -qq systemd)
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	touch $(DEBIAN_STAMP)

# The suite runs on xdist's workers, one module per worker at a time (module fixtures
# start real servers once); the modules holding slow tests first (tests/conftest.py).
PYTEST_WORKERS ?= 3
PYTEST_ARGS ?=
pytest: $(STAMP) $(OPENCLAW_STAMP) $(DEBIAN_STAMP) $(PG_STAMP)
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# The checks run side by side: mypy (2 min from a clean clone) fills the time the tests
# spend waiting on servers and processes.
test: $(STAMP) $(OPENCLAW_STAMP) $(DEBIAN_STAMP) $(PG_STAMP)
	$(MAKE) --no-print-directory -j3 lint typecheck pytest docs

# The documentation site in site/ (mkdocs.yml); --strict fails on a broken link or anchor.
# NO_MKDOCS_2_WARNING quiets a notice of the theme; never --quiet: it hides the warnings
# --strict counts, and a broken link would pass.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The console's photographs in docs/console/ (the README shows them), made by its tests.
screenshots: $(STAMP) $(DEBIAN_STAMP)
	MEMVAULT_SCREENSHOTS=1 $(BIN)/pytest -q -n 0 -p no:randomly tests/console

bench: $(STAMP) $(OPENCLAW_STAMP) $(PG_STAMP)
	cd bench && ../$(BIN)/python run.py

bench-quick: $(STAMP) $(OPENCLAW_STAMP) $(PG_STAMP)
	cd bench && ../$(BIN)/python run.py --quick

# LoCoMo answer accuracy with the model MEMVAULT_QA_BASE_URL / MEMVAULT_QA_MODEL name
# (retrieval only without one); pass options with QA_ARGS="--conversations 1 --limit 20".
bench-qa: $(STAMP)
	cd bench && ../$(BIN)/python locomo_qa.py $(QA_ARGS)

clean:
	rm -rf $(VENV) $(DEMO_VAULT) site .pytest_cache .mypy_cache .ruff_cache
