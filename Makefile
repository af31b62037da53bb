# The two commands of the quick start: `make demo` and `make test`.
# Both create .venv with the project and its extras on first use (Python 3.11+ only).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# mcp 1.x and 2.x cannot share an environment: the 1.x suite runs in its own, made on first use
VENV1 ?= .venv-mcp1
STAMP1 := $(VENV1)/.installed

.PHONY: demo test test-mcp1 check render replay bench mutate lint typecheck install clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Python 3.11+ is required (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[mcp,diagrams,dev,fastmcp,gateway]'
	@touch $(STAMP)

$(STAMP1): pyproject.toml
	$(PYTHON) -m venv $(VENV1)
	$(VENV1)/bin/python -m pip install --quiet --upgrade pip
	$(VENV1)/bin/python -m pip install --quiet -e '.[mcp1,dev,fastmcp3]'
	@touch $(STAMP1)

install: $(STAMP)

## The main job: model-check every model, render the diagrams, replay the incident.
demo: check render replay

check: $(STAMP)
	$(BIN)/python -m fsm check --brief --quiet models/*.py

render: $(STAMP)
	$(BIN)/python -m fsm render

replay: $(STAMP)
	$(BIN)/python -m fsm demo

## The whole test suite, linters and type checks included; then the mcp 1.x suite.
test: lint typecheck
	$(BIN)/python -m pytest -q
	$(MAKE) test-mcp1

test-mcp1: $(STAMP1)
	$(VENV1)/bin/python -m pytest -q tests/e2e_v1

lint: $(STAMP)
	$(BIN)/ruff check fsm models tests bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict --explicit-package-bases fsm models bench

## Every benchmark; one table, figures in bench/results.json.
bench: $(STAMP)
	$(BIN)/python -m bench

## Mutation testing of the decision code (not in CI: tens of minutes on 2 cores, one worker
## unless MUTATE_WORKERS=N); a table per file, written to bench/mutation.json.
MUTMUT_STAMP := $(VENV)/.mutmut-installed

$(MUTMUT_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[mutate]'
	@touch $(MUTMUT_STAMP)

mutate: $(MUTMUT_STAMP)
	$(BIN)/python -m bench.mutation run

clean:
	rm -rf $(VENV) $(VENV1) mutants .pytest_cache .mypy_cache .ruff_cache .hypothesis
