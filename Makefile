# Everything a fresh Debian machine with Python 3.11 needs; each step is skipped when already done.
PY       ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
NODE_DIR := otel_a2a/demo/node

.PHONY: all setup test lint bench demo clean

all: test

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.stamp-py: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

$(NODE_DIR)/node_modules/.stamp: $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Prometheus, promtool and Alertmanager come from Debian; the packaged services are not started.
.stamp-apt:
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null \
	   || ! command -v prometheus-alertmanager >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q \
	    --no-install-recommends prometheus prometheus-alertmanager; \
	fi
	touch $@

# valgrind (callgrind) only for `make bench`: it counts the instructions of the overhead rows.
.stamp-valgrind:
	@if ! command -v valgrind >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q \
	    --no-install-recommends valgrind; \
	fi
	touch $@

setup: $(VENV)/.stamp-py $(NODE_DIR)/node_modules/.stamp .stamp-apt

test: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(VENV)/.stamp-py
	$(BIN)/ruff check otel_a2a tests bench collector-config
	$(BIN)/ruff format --check otel_a2a tests bench collector-config
	$(BIN)/mypy --strict otel_a2a

bench: setup .stamp-valgrind
	$(BIN)/python -m bench

demo: setup
	$(BIN)/otel-a2a demo

clean:
	rm -rf $(VENV) $(NODE_DIR)/node_modules .stamp-apt .stamp-valgrind
