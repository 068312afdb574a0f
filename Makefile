# Everything a fresh Debian machine with Python 3.11 needs; each step is skipped when already done.
PY       ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
NODE_DIR := demo/node

.PHONY: all setup test lint bench demo clean

all: test

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.stamp-py: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# Node >= 20 (the @a2a-js/sdk peer) is a prerequisite, like Python 3.11: Debian 12 ships 18.
$(NODE_DIR)/node_modules/.stamp: $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	@node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null \
	  || { echo "make: Node.js >= 20 with npm is needed for the @a2a-js/sdk peer (found: $$(node -v 2>/dev/null || echo none))" >&2; exit 1; }
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
	$(BIN)/ruff check otel_a2a demo tests bench collector-config
	$(BIN)/ruff format --check otel_a2a demo tests bench collector-config
	$(BIN)/mypy --strict otel_a2a demo

bench: setup .stamp-valgrind
	$(BIN)/python -m bench

demo: $(VENV)/.stamp-py $(NODE_DIR)/node_modules/.stamp
	$(BIN)/otel-a2a demo

clean:
	rm -rf $(VENV) $(NODE_DIR)/node_modules .stamp-apt .stamp-valgrind
