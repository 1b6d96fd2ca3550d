# Set-up and checks. `make test` is what CI runs (.ci/run); `make demo` runs the main example.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# A second environment resolved afresh to the newest versions pyproject.toml allows (what `pip install
# dp-pipeline[...]` gives a user today), beside the locked one; `make test` runs the suite in both, at once.
LATEST := .venv-latest
LATEST_OVERRIDES := .ci/latest-overrides.txt
UV_VERSION := 0.13.8
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif

# The demo installs only what it runs (dp-pipeline with the airflow and cli extras); `make test` installs
# everything else (all extras, the test and lint tools) into the same .venv. The demo's sync is
# --inexact, so running it after `make test` removes nothing the tests need.
DEMO_EXTRAS := --extra airflow --extra cli
ENSURE_UV := command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || \
	python3 -m pip install --quiet "uv==$(UV_VERSION)"

.PHONY: env demo-env latest-env system-deps lint typecheck pytest pytest-latest test demo examples benchmarks clean

env: $(VENV)/.synced
demo-env: $(VENV)/.synced-demo
latest-env: $(LATEST)/.installed

$(VENV)/.synced: uv.lock pyproject.toml
	@$(ENSURE_UV)
	@echo "installing the development environment into $(VENV) (all extras, test and lint tools; first time: a few minutes)"
	@$(UV) sync --frozen --all-extras --quiet
	@touch $@ $(VENV)/.synced-demo

$(VENV)/.synced-demo: uv.lock pyproject.toml
	@$(ENSURE_UV)
	@echo "installing what the demo runs into $(VENV) (dp-pipeline[airflow,cli]; first time: about a minute)"
	@$(UV) sync --frozen --inexact $(DEMO_EXTRAS) --quiet
	@touch $@

# Re-resolved whenever pyproject.toml changes: every extra and the test tools (the dev extra), the highest
# versions allowed, with the overrides in $(LATEST_OVERRIDES).
$(LATEST)/.installed: pyproject.toml $(LATEST_OVERRIDES)
	@$(ENSURE_UV)
	@echo "installing the newest allowed versions of every dependency into $(LATEST) (first time: a few minutes)"
	@rm -rf $(LATEST)
	@$(UV) venv --quiet $(LATEST)
	@$(UV) pip install --quiet --python $(LATEST)/bin/python --resolution highest \
		--override $(LATEST_OVERRIDES) -e ".[dev]"
	@$(LATEST)/bin/python -c "import numpy, pandas; print('newest environment: numpy', numpy.__version__, \
		'pandas', pandas.__version__)"
	@touch $@

# Debian packages the tests use: a PostgreSQL server for the ledger tests, Chromium for the UI test, Java 17
# for the local Spark session of the Spark tests.
system-deps:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

lint: env
	$(BIN)/ruff check $(wildcard dp_pipeline airflow_plugin tests examples benchmarks)

typecheck: env
	$(BIN)/mypy

pytest: env system-deps
	$(BIN)/pytest

# Every module again in the newest environment; the slow statistical tests and the tests that start other
# processes (subprocesses, process pools, executors) run in the locked run only. Its own cache directory: the
# two runs go at once.
pytest-latest: latest-env system-deps
	$(LATEST)/bin/pytest -m "not slow and not processes" -o cache_dir=$(LATEST)/.pytest_cache

# Lint and typecheck first, then the locked and the newest-versions runs at the same time (each starts its
# own PostgreSQL, Spark and Airflow home); fails if either fails. Each output is printed whole when its run ends.
test: lint typecheck
	$(MAKE) --no-print-directory -j2 --output-sync=target pytest pytest-latest

demo: demo-env
	$(BIN)/python examples/demo.py
	$(BIN)/python examples/airflow_demo.py

clean:
	rm -rf $(VENV) $(LATEST) .pytest_cache .mypy_cache .ruff_cache
