# Quick start: `make demo` and `make test`. Both create .venv if missing and install the project into it.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck unit bench docs generate clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,bench,scale]'  # bench: torch (CPU build) so CI runs the gloo tests; scale: Ray
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/fabricsim demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools

typecheck: $(STAMP)
	$(BIN)/mypy src/fabricsim

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck unit

generate: $(STAMP)  # the API functions, CLI options and options reference from the run specs (fabricsim.api.specs)
	$(BIN)/python -m fabricsim.api.specs.generate

docs: $(STAMP)  # the API reference (mkdocs + mkdocstrings) into site/
	$(BIN)/mkdocs build --strict --quiet

bench: $(STAMP)
	$(BIN)/python -m pytest benchmarks/bench_*.py --benchmark-only -p no:cacheprovider

clean:
	rm -rf $(VENV) build dist site src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
