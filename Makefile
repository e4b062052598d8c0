# The verbs. Every target sets up what it needs: a fresh clone runs `make demo` or `make test` directly.
# Each concern keeps its own verbs in mk/<concern>.mk (infrastructure, acceptance, bench, evaluation).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
export CDK_DISABLE_VERSION_CHECK := 1

.PHONY: setup dev demo test lint format unit clean

setup: $(STAMP)

$(STAMP): pyproject.toml client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==26.3"
	$(BIN)/python -m pip install --quiet -e ./client -e ".[dev]"
	touch $(STAMP)

dev: setup
	$(BIN)/sentinel serve --seed

demo: setup
	$(BIN)/python -m sentinel_runner.demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy -p sentinel_domain -p sentinel_service

# GitHub's published REST and webhook descriptions (@octokit/openapi, @octokit/openapi-webhooks), which the
# tests' fake GitHub checks every request against: installed exactly as package-lock.json pins them.
NODE_STAMP := node_modules/.installed

$(NODE_STAMP): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund
	touch $(NODE_STAMP)

test: lint $(NODE_STAMP)
	$(BIN)/python -m pytest -n 2
	$(BIN)/sentinel eval

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

unit: setup
	$(BIN)/python -m pytest tests/unit

clean:
	rm -rf $(VENV) .pytest_cache

-include mk/*.mk
