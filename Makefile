# monolock — the two commands a newcomer needs are `make run` and `make test`.

GO       ?= go
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 5m

.PHONY: all help build run test lint vet fmt-check staticcheck fuzz bench-micro bench-heap clean python-test python-tools node-deps node-build node-test

all: build

## help: list the targets with what each does
help:
	@sed -n 's/^## \([a-z-]*\): /\1\t/p' $(MAKEFILE_LIST) | awk -F'\t' '{ printf "  %-14s %s\n", $$1, $$2 }'

## build: compile every command into bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

## run: build and start the server on its defaults (0.0.0.0:7070)
run: build
	./$(BIN)/monolock

# bench/ is a Go module of its own (the peers' clients stay out of the
# server's go.mod): every check runs in both modules.

## test: vet, gofmt, staticcheck, the Python and Node.js clients' checks, the whole suite under the race detector (both modules, the conformance kit judging every client), short fuzz runs
test: vet fmt-check staticcheck python-test node-test model model-variants
	$(GO) test -race -count=1 -timeout 8m ./...
	cd bench && $(GO) test -race -count=1 -timeout 8m ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=3s

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

staticcheck:
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) run $(STATICCHECK) ./...

# --- the Python client (clients/python) --------------------------------------
# Standard library only at run time; pyright (pinned in package-lock.json) is
# its type checker. The conformance kit judges it from `go test` (package
# cmd/monolock-conformance).

PYTHON ?= python3
PYDIR  := clients/python

## python-tools: install pyright, pinned by clients/python/package-lock.json (needs npm)
python-tools: $(PYDIR)/node_modules/.bin/pyright

$(PYDIR)/node_modules/.bin/pyright: $(PYDIR)/package-lock.json
	cd $(PYDIR) && npm ci --no-audit --no-fund
	touch $@

## python-test: the Python client's type check and its unittest suites (fakes and the real server)
python-test: build
	@if ! command -v $(PYTHON) >/dev/null; then \
		echo "SKIP python-test: $(PYTHON) is missing; install it with: apt-get install -y python3"; exit 0; fi; \
	if command -v npm >/dev/null; then \
		$(MAKE) --no-print-directory python-tools && (cd $(PYDIR) && ./node_modules/.bin/pyright); \
	else echo "SKIP pyright: npm is missing; install it with: apt-get install -y npm, then make python-tools"; fi && \
	cd $(PYDIR) && MONOLOCK_BIN=$(abspath $(BIN))/monolock $(PYTHON) -m unittest discover -s tests -t .

# --- the Node.js client (clients/node) ---------------------------------------
# No runtime dependencies; TypeScript and @types/node are pinned by
# clients/node/package-lock.json. node-build also builds what the conformance
# kit's Node.js driver runs (cmd/monolock-conformance, from `go test`).

NODEDIR := clients/node

## node-deps: install the Node.js client's build tools from its package-lock.json (npm ci)
node-deps: $(NODEDIR)/node_modules/.package-lock.json

$(NODEDIR)/node_modules/.package-lock.json: $(NODEDIR)/package-lock.json
	cd $(NODEDIR) && npm ci --no-audit --no-fund
	touch $@

## node-build: compile the Node.js client and its tests with tsc (dist/, dist-test/)
node-build: node-deps
	cd $(NODEDIR) && rm -rf dist dist-test && npm run --silent build

## node-test: the Node.js client's tests with node --test: fakes, the real server, the npm pack contents
node-test: build
	@if ! command -v npm >/dev/null || ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null; then \
		echo "SKIP node-test: Node.js 20 or later with npm is missing; install it (e.g. apt-get install -y nodejs npm)"; exit 0; fi; \
	$(MAKE) --no-print-directory node-build && \
	cd $(NODEDIR) && MONOLOCK_BIN=$(abspath $(BIN))/monolock npm test --silent

# --- the model of the safety argument (model/, Promela, checked by spin) ----
# MODEL_FLAGS passes preprocessor flags to every run: make model MODEL_FLAGS='-DGIVEUP=95'.
# One fault per run; each fault kind is its own exhaustive search (FAULT=1..5).

.PHONY: model model-variants model-deps

## model-deps: install spin and gcc from Debian's packages (root)
model-deps:
	@command -v spin >/dev/null && command -v gcc >/dev/null || \
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y spin gcc

## model: check the model's properties 1 and 2 on the defaults, each fault kind, and property 3 (about 10 minutes on a busy 2-core machine)
model: model-deps
	@set -e; for f in 1 2 3 4 5; do model/check.sh holds fault-$$f -DFAULT=$$f; done
	model/check.sh live liveness -DFAULT=3

## model-variants: every known-bad variant must fail with the property it breaks
model-variants: model-deps
	model/check.sh fails close-at-giveup 1 -DCLOSE_AT_GIVEUP=1 -DFAULT=2
	model/check.sh fails giveup-100 1 -DGIVEUP=100 -DFAULT=1
	model/check.sh fails giveup-90-stop-1 1 -DGIVEUP=90 -DSTOP=1 -DFAULT=1
	model/check.sh fails stop-2 1 -DSTOP=2 -DFAULT=1
	model/check.sh fails from-reply-stop-1 1 -DFROM_REPLY=1 -DSTOP=1 -DFAULT=1
	model/check.sh fails clock-step-back 2-tokens -DCLOCK_STEP_BACK=1 -DFAULT=5

## lint: vet, gofmt and staticcheck
lint: vet fmt-check staticcheck

# Every fuzz target, FUZZTIME each (3s inside `make test`).
FUZZ_TARGETS := \
	FuzzDecodeClient:./protocol/ \
	FuzzDecodeServer:./protocol/ \
	FuzzServer:./eventloop/ \
	FuzzMatch:./internal/glob/ \
	FuzzParse:./internal/acl/

## fuzz: run every fuzz target for FUZZTIME (default 5m each)
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		name=$${t%%:*}; pkg=$${t#*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## bench-micro: the testing.B benchmarks of the hot paths, with allocations
bench-micro:
	$(GO) test -run '^$$' -bench . -skip SessionHeap -benchmem ./protocol/ ./locktable/ ./eventloop/...

## bench-heap: the server's live heap per session (plain, TLS, mutual TLS) over 2,000 sessions, by allocation site
bench-heap:
	$(GO) test -run '^$$' -bench SessionHeap -benchtime 2000x ./eventloop/

clean:
	rm -rf $(BIN)

# --- benchmarks (bench/, its own module: run from there) -------------------

.PHONY: bench bench-quick bench-peers

## bench: the full benchmark run (several minutes): tables on stdout, JSON and charts in bench/out
bench: build
	cd bench && $(GO) run . -monolock $(abspath $(BIN))/monolock -wait-quiet 60s -json out/results.json -out out

## bench-quick: every scenario and every installed peer at small sizes (well under a minute)
bench-quick: build
	cd bench && $(GO) run . -monolock $(abspath $(BIN))/monolock -quick -json out/results-quick.json -out out

## bench-peers: install the peers the harness compares with (Redis, etcd, PostgreSQL); needs root
bench-peers:
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server etcd-server postgresql

# --- chaos harness (bench/chaos) ---------------------------------------------

.PHONY: chaos holder-faults

## holder-faults: does the old holder stop before the next starts? Freezes, SIGSTOP, signals to monolockctl, force release; 20 rounds each (about 2-3 minutes)
holder-faults: build
	cd bench && $(GO) run ./holderfaults -server $(abspath $(BIN))/monolock -ctl $(abspath $(BIN))/monolockctl

## chaos: many clients through fault proxies, server restarts, fenced writes, then the checks (about 2 minutes; CHAOS_DURATION=5m for longer)
chaos: build
	cd bench && $(GO) run ./chaos -build=false -server $(abspath $(BIN))/monolock

# --- adversarial harness (bench/adversarial) ---------------------------------

.PHONY: adversarial

## adversarial: each attack on the loop's fairness against the built server, with a canary, lock probes and /readyz probes (about 2 minutes, loopback only)
adversarial: build
	cd bench && $(GO) run ./adversarial -server $(abspath $(BIN))/monolock

# --- failover harness (bench/failover) ---------------------------------------

.PHONY: failover failover-deps storm

## failover: the keepalived pair for real in network namespaces, four faults x 5 rounds, the table (root; about 3 minutes)
failover: build
	cd bench && $(GO) run ./failover -server $(abspath $(BIN))/monolock -scripts $(abspath deploy/keepalived)

## failover-deps: install what make failover needs (root): keepalived, iproute2, curl
failover-deps:
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y keepalived iproute2 curl

## storm: a reconnect storm on loopback: 15,000 plain and 5,000 mutual-TLS sessions re-admitted by a second server, full vs resumed handshakes, with and without jitter (a few minutes)
storm: build
	cd bench && $(GO) run ./storm -server $(abspath $(BIN))/monolock
