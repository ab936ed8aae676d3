# memvault: `make run` starts memvault on its embedded default, `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_VAULT ?= demo-vault
STAMP := $(VENV)/.installed

.PHONY: install run test lint typecheck pytest bench bench-quick clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
# The local model's ONNX file, exported once, so no first search waits for it.
	$(BIN)/memvault embedder prepare
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	@bash scripts/demo.sh "$(DEMO_VAULT)"

lint: $(STAMP)
	$(BIN)/ruff format --check src tests bench
	$(BIN)/ruff check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict src/memvault

pytest: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck pytest

bench: $(STAMP)
	cd bench && ../$(BIN)/python run.py

bench-quick: $(STAMP)
	cd bench && ../$(BIN)/python run.py --quick

clean:
	rm -rf $(VENV) $(DEMO_VAULT) .pytest_cache .mypy_cache .ruff_cache
