# Everything a fresh Debian machine with Python 3.11 needs; each step is skipped when already done.
PY       ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
NODE_DIR := demo/node

.PHONY: all setup tools go-gateway go-test jvm test matrix upgrade lint bench demo screenshot stack clean

all: test

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Installed from the committed lock, so that a new upstream release cannot change a fresh run;
# `make upgrade` refreshes it (requirements/lock.py).
$(VENV)/.stamp-py: $(BIN)/python pyproject.toml requirements/lock.txt
	$(BIN)/pip install -q -c requirements/lock.txt -e '.[dev]'
	touch $@

upgrade: $(BIN)/python
	$(BIN)/python requirements/lock.py
	$(BIN)/pip install -q -c requirements/lock.txt -e '.[dev]'
	touch $(VENV)/.stamp-py

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

# Chromium from Debian for the page's browser tests and `make screenshot`: Playwright (the dev
# extra) drives this one and downloads no browser of its own.
.stamp-chromium:
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q \
	    --no-install-recommends chromium; \
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

# Go-built tools in .tools/bin (git-ignored), each rebuilt only when its manifest changes; Go's
# module and build caches (~/go/pkg/mod, ~/.cache/go-build) make a rebuild on the same machine
# fast. Go >= 1.26 with the Go module proxy is a prerequisite, like Python 3.11.
TOOLS       := .tools
OCB_VERSION := $(shell sed -n 's|.*/collector/receiver/otlpreceiver \(v[0-9.]*\).*|\1|p' collector-config/builder-config.yaml)
OCB         := $(TOOLS)/ocb-$(OCB_VERSION)/builder

# The builder refuses core modules of another release than its own: it follows the manifest.
$(OCB):
	@command -v go >/dev/null || { echo "make: Go >= 1.26 is needed to build the tools" >&2; exit 1; }
	GOBIN=$(abspath $(dir $@)) go install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)

$(TOOLS)/bin/otelcol-a2a: collector-config/builder-config.yaml | $(OCB)
	mkdir -p $(TOOLS)/build $(TOOLS)/bin
	$(OCB) --config=collector-config/builder-config.yaml --ldflags='-s -w'
	install -m 0755 $(TOOLS)/build/otelcol-a2a/otelcol-a2a $@

# Jaeger v2 is a tool of its own module (tools/jaeger): its go.mod has a replace directive,
# so `go install ...@version` refuses it.
$(TOOLS)/bin/jaeger: tools/jaeger/go.mod tools/jaeger/go.sum
	@command -v go >/dev/null || { echo "make: Go >= 1.26 is needed to build the tools" >&2; exit 1; }
	mkdir -p $(TOOLS)/bin
	cd tools/jaeger && go build -trimpath -ldflags='-s -w' -o $(abspath $@) github.com/jaegertracing/jaeger/cmd/jaeger

# otel-a2a's Go interceptor for a2a-go clients (go/otela2a, a module of its own): its go tests
# run again only when its sources change (the stamp).
OTELA2A_SRC := $(wildcard go/otela2a/*.go) go/otela2a/go.mod go/otela2a/go.sum
$(TOOLS)/.stamp-go-test: $(OTELA2A_SRC)
	@command -v go >/dev/null || { echo "make: Go >= 1.26 is needed for the Go interceptor's tests" >&2; exit 1; }
	mkdir -p $(TOOLS)
	cd go/otela2a && go test ./...
	touch $@

go-test: $(TOOLS)/.stamp-go-test

# The demo's Go gateway on a2a-go (demo/go/gateway, a module of its own, which uses go/otela2a
# through a replace directive): only for `python -m demo --gateway go` and the tests; the
# default demo needs no Go.
GO_GATEWAY_SRC := $(wildcard demo/go/gateway/*.go) demo/go/gateway/go.mod demo/go/gateway/go.sum \
                  $(filter-out %_test.go,$(OTELA2A_SRC))
$(TOOLS)/bin/a2a-go-gateway: $(GO_GATEWAY_SRC)
	@command -v go >/dev/null || { echo "make: Go >= 1.26 is needed to build the tools" >&2; exit 1; }
	mkdir -p $(TOOLS)/bin
	cd demo/go/gateway && go build -trimpath -ldflags='-s -w' -o $(abspath $@) .

go-gateway: $(TOOLS)/bin/a2a-go-gateway

tools: $(TOOLS)/bin/otelcol-a2a $(TOOLS)/bin/jaeger $(TOOLS)/bin/a2a-go-gateway

# The demo's JVM worker (demo/jvm, the A2A Java SDK): one shaded jar, rebuilt only when its pom
# or sources change. Maven's local repository (~/.m2) is the cache: offline first, online when
# something is missing. Java 17 and Maven 3.8 are prerequisites, like Python 3.11.
JVM_JAR := $(TOOLS)/jvm/a2a-jvm-worker.jar
$(JVM_JAR): demo/jvm/pom.xml $(shell find demo/jvm/src -type f 2>/dev/null)
	@command -v mvn >/dev/null && command -v java >/dev/null \
	  || { echo "make: Java 17 and Maven are needed to build the JVM worker" >&2; exit 1; }
	mvn -B -q -Dstyle.color=never -o -f demo/jvm/pom.xml package >/dev/null 2>&1 \
	  || mvn -B -q -Dstyle.color=never -f demo/jvm/pom.xml package
	install -m 0644 $(TOOLS)/jvm/target/a2a-jvm-worker.jar $@

jvm: $(JVM_JAR)

setup: $(VENV)/.stamp-py $(NODE_DIR)/node_modules/.stamp .stamp-apt

test: setup .stamp-chromium tools jvm go-test
	$(BIN)/python -m pytest -q -p no:cacheprovider

# The unit suite on the oldest supported releases and on wrapt 1, each in a fresh venv
# (requirements/matrix/); CI runs it after `make test`.
matrix:
	PY=$(PY) bash .ci/matrix

lint: $(VENV)/.stamp-py
	$(BIN)/ruff check otel_a2a demo tests bench collector-config deploy
	$(BIN)/ruff format --check otel_a2a demo tests bench collector-config deploy
	$(BIN)/mypy --strict otel_a2a demo
	@command -v go >/dev/null || { echo "make: Go >= 1.26 is needed to lint the Go modules" >&2; exit 1; }
	@unformatted=$$(gofmt -l go/otela2a demo/go/gateway); \
	  [ -z "$$unformatted" ] || { echo "gofmt: $$unformatted" >&2; exit 1; }
	cd go/otela2a && go vet ./...
	cd demo/go/gateway && go vet ./...

bench: setup .stamp-valgrind
	$(BIN)/python -m bench

# The collector, Jaeger, Prometheus and Alertmanager on 127.0.0.1 until Ctrl-C (deploy/README.md).
stack: $(VENV)/.stamp-py .stamp-apt tools
	$(BIN)/python deploy/local/stack.py

DEMO_PAGE := build/demo-timeline.html

demo: $(VENV)/.stamp-py $(NODE_DIR)/node_modules/.stamp
	$(BIN)/python -m demo --html $(DEMO_PAGE)

# The README's picture of the timeline page, from a fresh restart run of the demo.
screenshot: $(VENV)/.stamp-py $(NODE_DIR)/node_modules/.stamp .stamp-chromium
	$(BIN)/python -m demo.screenshot --png docs/timeline.png

clean:
	rm -rf $(VENV) $(NODE_DIR)/node_modules .stamp-apt .stamp-valgrind .stamp-chromium $(TOOLS)
