# monolock — the two commands a newcomer needs are `make run` and `make test`.

GO       ?= go
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 5m

.PHONY: all help build run test lint vet fmt-check staticcheck fuzz bench-micro bench-heap clean python-test python-tools python-dist node-deps node-build node-test rust-tools rust-build rust-test rust-bench java-build java-test java-bench test-suites fence-deps etcd-deps withdb tooz-deps tooz-test tooz-bench-deps tooz-bench java-shedlock-test shedlock-bench

all: build

## help: list the targets with what each does
help:
	@sed -n 's/^## \([a-z-]*\): /\1\t/p' $(MAKEFILE_LIST) | awk -F'\t' '{ printf "  %-14s %s\n", $$1, $$2 }'

## build: compile every command into bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

## run: build and start the server on loopback: the protocol on 127.0.0.1:7070, the admin API and its console on 127.0.0.1:7071 (it prints the console's URL)
run: build
	./$(BIN)/monolock -listen 127.0.0.1:7070 -admin-listen 127.0.0.1:7071

# bench/ and integrations/gocronlock/ are Go modules of their own (the
# peers' clients and gocron stay out of the server's go.mod): every check
# runs in each module.
GOCRONLOCK := integrations/gocronlock

## test: vet, gofmt, staticcheck, the Python, Node.js, Rust and Java clients' checks, the whole suite under the race detector (every module, the gocron integration's five-scheduler judge included, the conformance kit judging every client), short fuzz runs, the model of the safety argument (spin); the fence tests against a PostgreSQL and a MariaDB it installs and starts; the failover tests against an etcd it installs (etcd-deps)
test: vet fmt-check staticcheck model-checks fence-deps withdb console-deps etcd-deps
	MONOLOCK_TEST_BROWSER=1 $(WITHDB) $(MAKE) --no-print-directory test-suites

# The suites of make test, beside one PostgreSQL and one MariaDB for all.
test-suites: python-test tooz-test node-test rust-test java-test
	$(GO) test -race -count=1 -timeout 15m ./...
	cd bench && $(GO) test -race -count=1 -timeout 8m ./...
	cd $(GOCRONLOCK) && $(GO) test -race -count=1 -timeout 5m ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=3s

# --- the fence tests' databases ----------------------------------------------
# The fence helpers of every client are tested against real PostgreSQL and
# MariaDB servers, from Debian's packages, with the Python drivers the Python
# tests use (the client itself needs none). withdb starts both servers on
# ports picked at run time, data in a temporary directory, runs a command with
# MONOLOCK_TEST_POSTGRES and MONOLOCK_TEST_MYSQL naming them, and removes both
# afterwards (docs/fencing.md, Testing against real databases).

FENCE_PACKAGES := postgresql mariadb-server python3-psycopg2 python3-pymysql
WITHDB := $(abspath $(BIN))/withdb
# Runs a command beside the databases, unless make test started them already.
WITH_DATABASES = $(if $(MONOLOCK_TEST_POSTGRES),,$(WITHDB))
# The python3 Debian's python3-psycopg2 and python3-pymysql are installed for.
DEBIAN_PYTHON ?= /usr/bin/python3

## fence-deps: install what the fence tests need from Debian's packages (root): postgresql, mariadb-server, python3-psycopg2, python3-pymysql; nothing when they are there
fence-deps:
	@missing=$$(for p in $(FENCE_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "fence-deps: installing" $$missing; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y $$missing; \
	fi

## etcd-deps: install etcd (Debian's etcd-server, root) for the tests of failover through etcd; nothing when it is there
etcd-deps:
	@command -v etcd >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y etcd-server; }

## withdb: build bin/withdb, which runs a command beside a throwaway PostgreSQL and MariaDB
withdb:
	$(GO) build -o $(BIN)/withdb ./internal/testsupport/testdb/withdb

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd $(GOCRONLOCK) && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

staticcheck:
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) run $(STATICCHECK) ./...
	cd $(GOCRONLOCK) && $(GO) run $(STATICCHECK) ./...

# --- the console's browser test (internal/adminhttp/console) ----------------
# Debian's Chromium, driven by playwright-core pinned in the test's
# package-lock.json (npm ci; playwright-core downloads no browser). make test
# sets MONOLOCK_TEST_BROWSER=1, so that a missing browser fails the test
# instead of skipping it. Screenshots land in bin/console/.

CONSOLE_TEST := internal/adminhttp/console/browsertest

.PHONY: console-deps console-test

## console-deps: install what the console's browser test needs (root): Debian's chromium, and playwright-core from its package-lock.json; nothing when they are there
console-deps: $(CONSOLE_TEST)/node_modules/.package-lock.json
	@dpkg-query -W -f='$${Status}\n' chromium 2>/dev/null | grep -q 'install ok installed' || \
		{ echo "console-deps: installing chromium"; apt-get update && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y chromium; }

$(CONSOLE_TEST)/node_modules/.package-lock.json: $(CONSOLE_TEST)/package-lock.json
	@command -v npm >/dev/null || { echo "console-deps: npm is missing: install Node.js 20 or later with npm (apt-get install -y nodejs npm, or nodesource)"; exit 1; }
	cd $(CONSOLE_TEST) && npm ci --no-audit --no-fund
	touch $@

## console-test: the console in Chromium against the built server: a real holder and waiter, force-release by mouse and by keyboard, screenshots in bin/console/ (under a minute)
console-test: console-deps
	node --check internal/adminhttp/console/static/console.js
	node --check $(CONSOLE_TEST)/drive.mjs
	MONOLOCK_TEST_BROWSER=1 $(GO) test -count=1 -run 'InChromium' -v ./internal/adminhttp/console/

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

## python-test: the Python client's type check and its unittest suites (fakes, the real server, the fence helper on PostgreSQL and MariaDB)
python-test: build fence-deps withdb
	@if ! command -v $(PYTHON) >/dev/null; then \
		echo "SKIP python-test: $(PYTHON) is missing; install it with: apt-get install -y python3"; exit 0; fi; \
	if command -v npm >/dev/null; then \
		$(MAKE) --no-print-directory python-tools && (cd $(PYDIR) && ./node_modules/.bin/pyright); \
	else echo "SKIP pyright: npm is missing; install it with: apt-get install -y npm, then make python-tools"; fi && \
	cd $(PYDIR) && MONOLOCK_BIN=$(abspath $(BIN))/monolock $(PYTHON) -m unittest discover -s tests -t . && \
	$(WITH_DATABASES) $(DEBIAN_PYTHON) -m unittest tests.db_fence

## python-dist: build the Python client's wheel (pip wheel; setuptools from PyPI, as pyproject.toml pins it) in a temporary directory and check that it ships the LICENSE with its metadata
python-dist:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cd $(PYDIR) && \
	$(PYTHON) -m pip wheel --no-deps --quiet --wheel-dir "$$tmp" . && rm -rf build monolock.egg-info && \
	$(PYTHON) check_dist.py "$$tmp"/monolock-*.whl

# --- the tooz driver (clients/python/monolock/tooz_driver.py) ---------------
# tooz 9.1.0, what its tests/test_coordination.py imports and pytest, each
# pinned exactly by clients/python/tooz-requirements.txt, in a virtualenv of
# their own (bin/tooz-venv), with the client installed editable so the
# tooz.backends entry point "monolock" is registered. tooz needs Python 3.11.

TOOZ_VENV := $(abspath $(BIN))/tooz-venv

## tooz-deps: create bin/tooz-venv with tooz 9.1.0 and its suite's needs (pinned by clients/python/tooz-requirements.txt) and pip install -e 'clients/python[tooz]'
tooz-deps: $(TOOZ_VENV)/.installed

$(TOOZ_VENV)/.installed: $(PYDIR)/tooz-requirements.txt $(PYDIR)/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "tooz-deps: tooz 9.1.0 needs Python 3.11 or later; $(PYTHON) is $$($(PYTHON) -V 2>&1): install a newer python3 or set PYTHON="; exit 1; }
	rm -rf $(TOOZ_VENV)
	$(PYTHON) -m venv $(TOOZ_VENV)
	$(TOOZ_VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -r $(PYDIR)/tooz-requirements.txt
	$(TOOZ_VENV)/bin/pip check --disable-pip-version-check
	$(TOOZ_VENV)/bin/pip install --quiet --disable-pip-version-check --no-build-isolation -e '$(PYDIR)[tooz]'
	touch $@

## tooz-test: the tooz driver: pyright, its unit and real-server tests, and tooz's own tooz/tests/test_coordination.py unchanged against bin/monolock (prints passed, failed, skipped)
tooz-test: build
	@if ! $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then \
		echo "SKIP tooz-test: tooz 9.1.0 needs Python 3.11 or later; install it and set PYTHON="; exit 0; fi; \
	$(MAKE) --no-print-directory tooz-deps && \
	if command -v npm >/dev/null; then \
		$(MAKE) --no-print-directory python-tools && (cd $(PYDIR) && ./node_modules/.bin/pyright -p pyrightconfig.tooz.json); \
	else echo "SKIP pyright: npm is missing; install it with: apt-get install -y npm, then make python-tools"; fi && \
	cd $(PYDIR) && MONOLOCK_BIN=$(abspath $(BIN))/monolock $(TOOZ_VENV)/bin/python -m unittest discover -s tests_tooz -t . && \
	MONOLOCK_BIN=$(abspath $(BIN))/monolock $(TOOZ_VENV)/bin/python -m tests_tooz.suite

# tooz-bench compares the driver with tooz's own postgresql:// driver, which
# needs psycopg2: a virtualenv of its own (bin/tooz-bench-venv), the same
# pinned set as tooz-deps plus clients/python/tooz-bench-requirements.txt, so
# make test's bin/tooz-venv stays exactly what tooz's suite is judged in.

TOOZ_BENCH_VENV := $(abspath $(BIN))/tooz-bench-venv

## tooz-bench-deps: create bin/tooz-bench-venv: tooz-deps' pinned set plus psycopg2-binary (clients/python/tooz-bench-requirements.txt) and the client, editable
tooz-bench-deps: $(TOOZ_BENCH_VENV)/.installed

$(TOOZ_BENCH_VENV)/.installed: $(PYDIR)/tooz-requirements.txt $(PYDIR)/tooz-bench-requirements.txt $(PYDIR)/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "tooz-bench-deps: tooz 9.1.0 needs Python 3.11 or later; $(PYTHON) is $$($(PYTHON) -V 2>&1): install a newer python3 or set PYTHON="; exit 1; }
	rm -rf $(TOOZ_BENCH_VENV)
	$(PYTHON) -m venv $(TOOZ_BENCH_VENV)
	$(TOOZ_BENCH_VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -r $(PYDIR)/tooz-requirements.txt -r $(PYDIR)/tooz-bench-requirements.txt
	$(TOOZ_BENCH_VENV)/bin/pip check --disable-pip-version-check
	$(TOOZ_BENCH_VENV)/bin/pip install --quiet --disable-pip-version-check --no-build-isolation -e '$(PYDIR)[tooz]'
	touch $@

## tooz-bench: tooz's acquire+release through the monolock driver vs tooz's PostgreSQL driver in one run: uncontended, two contending processes, a killed and a frozen holder (bin/monolock and a throwaway PostgreSQL; 2 to 5 minutes)
tooz-bench: build withdb fence-deps tooz-bench-deps
	cd $(PYDIR) && MONOLOCK_BIN=$(abspath $(BIN))/monolock $(WITHDB) $(TOOZ_BENCH_VENV)/bin/python -m tests_tooz.bench $(TOOZ_BENCH_ARGS)

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

## verrou-test: @verrou/core's registerStoreTestSuite (pinned by clients/node/package-lock.json), unchanged, on monolock/verrou against a real server; npm test, and so node-test, runs it too
.PHONY: verrou-test
verrou-test: build node-build
	cd $(NODEDIR) && MONOLOCK_BIN=$(abspath $(BIN))/monolock npm run --silent verrou-suite

## node-test: the Node.js client's tests with node --test: fakes, the real server, the fence helper on PostgreSQL and MariaDB, the npm pack contents
node-test: build fence-deps withdb
	@if ! command -v npm >/dev/null || ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null; then \
		echo "SKIP node-test: Node.js 20 or later with npm is missing; install it (e.g. apt-get install -y nodejs npm)"; exit 0; fi; \
	$(MAKE) --no-print-directory node-build && \
	cd $(NODEDIR) && MONOLOCK_BIN=$(abspath $(BIN))/monolock $(WITH_DATABASES) npm test --silent

.PHONY: node-tls-rss

## node-tls-rss: the Node.js client's resident set size over 6,000 mutual-TLS locks of one Client against the built server (tens of seconds; needs openssl)
node-tls-rss: build node-build
	cd $(NODEDIR) && MONOLOCK_BIN=$(abspath $(BIN))/monolock node bench/tls-rss.mjs

# --- the Rust client (clients/rust) -----------------------------------------
# The crate monolock; its dependencies are pinned by clients/rust/Cargo.lock
# (every cargo command runs with --locked). All feature combinations share
# one target directory, so each dependency builds once. rust-build builds
# what the conformance kit's Rust drivers run (cmd/monolock-conformance,
# from `go test`).

CARGO   ?= cargo
RUSTDIR := clients/rust
# Every combination of the client's features, "" being none at all, then the
# fence helper alone and with everything; those two run beside withdb's
# PostgreSQL (MONOLOCK_TEST_POSTGRES), unless make test started it already.
RUST_FEATURES := "" tokio blocking tls tokio,blocking tokio,tls blocking,tls tokio,blocking,tls \
	fence-postgres tokio,blocking,tls,fence-postgres
# What `cargo package --list` may hold: the sources, the manifest (and the
# copy cargo keeps of it), the lock file, README, licence, cargo's VCS note.
RUST_PACKAGE_FILES := ^(src/.*\.rs|Cargo\.toml|Cargo\.toml\.orig|Cargo\.lock|README\.md|LICENSE|\.cargo_vcs_info\.json)$$

## rust-tools: install rustfmt and clippy with rustup when they are missing
rust-tools:
	@installed=$$(rustup component list --installed 2>/dev/null); \
	for c in rustfmt clippy; do \
		echo "$$installed" | grep -q "^$$c" || rustup component add $$c || \
			{ echo "cannot install $$c: install rustup (https://rustup.rs), then rustup component add $$c"; exit 1; }; \
	done

## rust-build: build the Rust client's conformance driver (async and --blocking)
rust-build:
	cd $(RUSTDIR) && $(CARGO) build --locked --example conformance --features blocking,tls

## rust-test: the Rust client's fmt, clippy, tests of every feature combination (fakes, the real server, the fence helper on PostgreSQL), doc tests, the step scripts' count, package contents
rust-test: build fence-deps withdb
	@if ! command -v $(CARGO) >/dev/null; then \
		echo "SKIP rust-test: cargo is missing; install Rust with rustup (https://rustup.rs)"; exit 0; fi; \
	set -e; \
	$(MAKE) --no-print-directory rust-tools; \
	cd $(RUSTDIR); \
	$(CARGO) fmt --check; \
	$(CARGO) clippy --locked --all-targets --all-features -- -D warnings; \
	for f in $(RUST_FEATURES); do \
		echo "cargo test --no-default-features --features '$$f'"; \
		case "$$f" in *fence-postgres*) db="$(WITH_DATABASES)";; *) db=;; esac; \
		MONOLOCK_BIN=$(abspath $(BIN))/monolock $$db $(CARGO) test --locked --quiet --no-default-features --features "$$f" --all-targets; \
	done; \
	$(CARGO) test --locked --quiet --all-features --doc; \
	echo "the step scripts (protocol/testdata/step) against the Rust step:"; \
	$(CARGO) test --locked --quiet --no-default-features --lib step_scripts -- --nocapture; \
	files=$$($(CARGO) package --list --locked --allow-dirty 2>/dev/null); \
	extra=$$(echo "$$files" | grep -Ev '$(RUST_PACKAGE_FILES)' || true); \
	if [ -n "$$extra" ]; then echo "cargo package would ship more than sources, manifest, README and licence:"; echo "$$extra"; exit 1; fi; \
	echo "cargo package --list: $$(echo "$$files" | wc -l) files, sources, manifest, README and licence only"
	$(MAKE) --no-print-directory rust-build

# --- the Java client (clients/java) -----------------------------------------
# No runtime dependencies; JUnit 5 and every Maven plugin are pinned in
# clients/java/pom.xml (the first run downloads them from Maven Central).
# java-build also compiles what the conformance kit's Java driver runs
# (cmd/monolock-conformance, from `go test`).

JAVADIR := clients/java
MVN     ?= mvn -B -ntp
# What the jar may hold: the classes, the licence and the Maven metadata.
JAVA_JAR_ALLOWED := ^(META-INF/|META-INF/MANIFEST\.MF|META-INF/LICENSE|META-INF/maven/.*|io/|io/github/|io/github/monolock/|io/github/monolock/[A-Za-z0-9_$$-]+\.class)$$

## java-build: compile the Java client and its tests (target/classes, target/test-classes; the kit's driver)
java-build:
	cd $(JAVADIR) && $(MVN) -q test-compile

## java-test: the Java client's build: unit tests (fakes, the real server, the fence on PostgreSQL and MariaDB), Javadoc without warnings, the jar's contents
java-test: build
	@if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then \
		echo "SKIP java-test: a JDK of 17 or later with Maven is missing; install it with: apt-get install -y openjdk-17-jdk-headless maven"; exit 0; fi; \
	withdb=; if command -v mariadbd >/dev/null 2>&1 || test -x /usr/sbin/mariadbd; then \
		if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1; then \
			withdb="$(GO) run ./internal/testsupport/testdb/withdb --"; fi; fi; \
	if [ -z "$$withdb" ]; then echo "java-test: no PostgreSQL and MariaDB servers (install them with apt-get install -y postgresql mariadb-server): the fence tests skip"; fi; \
	set -e; \
	$$withdb sh -c 'cd $(JAVADIR) && MONOLOCK_BIN=$(abspath $(BIN))/monolock $(MVN) verify'; \
	cd $(JAVADIR); \
	extra=$$(jar tf target/monolock-client-*.jar | grep -vE '$(JAVA_JAR_ALLOWED)' || true); \
	if [ -n "$$extra" ]; then echo "the jar holds more than the classes, the licence and the Maven metadata:"; echo "$$extra"; exit 1; fi; \
	echo "jar contents: $$(jar tf target/monolock-client-*.jar | grep -c '\.class$$') classes, META-INF/LICENSE, the Maven metadata"; \
	$(MAKE) --no-print-directory -C $(CURDIR) java-shedlock-test

## java-shedlock-test: the ShedLock provider (clients/java/shedlock, its own artifact): ShedLock's own provider suite and the timer rules, against bin/monolock; installs the client into the local Maven repository first
java-shedlock-test: build
	cd $(JAVADIR) && $(MVN) -q install -DskipTests -Dmaven.javadoc.skip=true
	cd $(JAVADIR)/shedlock && MONOLOCK_BIN=$(abspath $(BIN))/monolock $(MVN) verify

## shedlock-bench: lock+unlock cycles through the ShedLock provider (bin/monolock) and ShedLock's JDBC provider (a throwaway PostgreSQL from bin/withdb), and a dead node's lock freed after the lease against lockAtMostFor (about a minute)
shedlock-bench: build withdb
	cd $(JAVADIR) && $(MVN) -q install -DskipTests -Dmaven.javadoc.skip=true
	cd $(JAVADIR)/shedlock && $(MVN) -q test-compile dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile=target/test.classpath
	$(BIN)/withdb -- sh -c 'cd $(JAVADIR)/shedlock && java -cp target/classes:target/test-classes:$$(cat target/test.classpath) io.github.monolock.shedlock.ShedLockBench -server $(abspath $(BIN))/monolock -cycles 2000'

## java-bench: threads, heap per waiting lease and CPU per acquire/release cycle of the Java client against bin/monolock (10,000 waiting leases; about a minute)
java-bench: build java-build
	ulimit -n 20000 && cd $(JAVADIR) && java -XX:+UseSerialGC -Xmx512m -cp target/classes:target/test-classes io.github.monolock.WaitingLeasesBench -server $(abspath $(BIN))/monolock -waiters 10000 -cycles 2000

## rust-bench: the Rust client's CPU and memory per waiting lock (10,000 async, 5,000 blocking) and per acquire/release cycle, against bin/monolock (about a minute)
rust-bench: build
	cd $(RUSTDIR) && ulimit -n 20000 && \
	$(CARGO) run --locked --release --example bench --features blocking -- $(abspath $(BIN))/monolock 10000 && \
	$(CARGO) run --locked --release --example bench --features blocking -- $(abspath $(BIN))/monolock 5000 --blocking

# --- the model of the safety argument (model/, Promela, checked by spin) ----
# MODEL_FLAGS passes preprocessor flags to every run: make model MODEL_FLAGS='-DGIVEUP=95'.
# One fault per run; each fault kind is its own exhaustive search (FAULT=1..5,
# and 6 with HA_ETCD=1).
# The model's checks, one a line: model/check.sh's arguments. HA_ETCD=1
# makes faults 5 and 6 the etcd-elected leader's failover, checked at the
# model's defaults (DRIFT=1: the clients' clocks drift), but for the ERROR
# lost with no slack left: GIVEUP_T + DRIFT + STOP = LEASE holds there with
# the clocks exact (DRIFT=0). The longest first, so that the others share
# the second job.
define MODEL_HOLDS
holds ha-etcd-6 -DHA_ETCD=1 -DFAULT=6
holds ha-etcd-5 -DHA_ETCD=1 -DFAULT=5
holds ha-etcd-clock-step-back -DHA_ETCD=1 -DCLOCK_STEP_BACK=1 -DFAULT=5
holds fault-5 -DFAULT=5
holds fault-4 -DFAULT=4
holds fault-2 -DFAULT=2
holds fault-1 -DFAULT=1
holds fault-3 -DFAULT=3
live liveness -DFAULT=3
holds ha-etcd-err-lost-stop-2 -DHA_ETCD=1 -DDRIFT=0 -DERR_LOST=1 -DSTOP=2 -DFAULT=5
endef
# Every known-bad variant must fail with the property it breaks. The HA ones
# fail with the clients' clocks exact (DRIFT=0), one of the runs DRIFT=1
# explores: the failure is the variant's, not the drift's, and the checks
# above at DRIFT=1 would find it too.
define MODEL_VARIANTS
fails close-at-giveup 1 -DCLOSE_AT_GIVEUP=1 -DFAULT=2
fails giveup-100 1 -DGIVEUP=100 -DFAULT=1
fails giveup-90-stop-1 1 -DGIVEUP=90 -DSTOP=1 -DFAULT=1
fails stop-2 1 -DSTOP=2 -DFAULT=1
fails from-reply-stop-1 1 -DFROM_REPLY=1 -DSTOP=1 -DFAULT=1
fails clock-step-back 2-tokens -DCLOCK_STEP_BACK=1 -DFAULT=5
fails ha-no-leader-giveup 1 -DHA_ETCD=1 -DDRIFT=0 -DLEADER_GIVEUP=0 -DFAULT=5
fails ha-no-leader-wait 1 -DHA_ETCD=1 -DDRIFT=0 -DLEADER_WAIT=0 -DFAULT=6
fails ha-credit-resign-at-once 1 -DHA_ETCD=1 -DDRIFT=0 -DRESIGN=2 -DERR_LOST=1 -DSTOP=2 -DFAULT=5
fails ha-clock-tokens-step-back 2-tokens -DHA_ETCD=1 -DDRIFT=0 -DETCD_TOKENS=0 -DCLOCK_STEP_BACK=1 -DFAULT=5
endef
export MODEL_HOLDS MODEL_VARIANTS
# How many checks run at once; each prints its report whole when it is done.
MODEL_JOBS ?= 2
# Runs the checks listed in the variables named, MODEL_JOBS at once; every
# check runs, and any that fails fails the target.
model_checks = printf '%s\n' $(foreach v,$(1),"$$$(v)") | xargs -P$(MODEL_JOBS) -L1 model/check.sh

.PHONY: model model-variants model-checks model-deps

## model-deps: install spin and gcc from Debian's packages (root)
model-deps:
	@command -v spin >/dev/null && command -v gcc >/dev/null || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y spin gcc; }

## model: check the model's properties 1 and 2 on the defaults for each fault kind, property 3, and the failover through etcd at the defaults (the clients' clocks drifting), MODEL_JOBS checks at once (2)
model: model-deps
	@$(call model_checks,MODEL_HOLDS)

## model-variants: every known-bad variant must fail with the property it breaks
model-variants: model-deps
	@$(call model_checks,MODEL_VARIANTS)

## model-checks: model and model-variants from one list, two checks at once (what make test runs)
model-checks: model-deps
	@$(call model_checks,MODEL_HOLDS MODEL_VARIANTS)

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

.PHONY: bench bench-quick bench-peers bench-netns-deps

## bench: the full benchmark run (several minutes): tables on stdout, JSON and charts in bench/out; then the integrations against the backends users would otherwise pick (shedlock-bench, tooz-bench)
bench: build bench-netns-deps
	cd bench && $(GO) run . -monolock $(abspath $(BIN))/monolock -wait-quiet 60s -json out/results.json -out out
	$(MAKE) --no-print-directory shedlock-bench tooz-bench

## bench-quick: every scenario and every installed peer at small sizes (well under a minute)
bench-quick: build
	cd bench && $(GO) run . -monolock $(abspath $(BIN))/monolock -quick -json out/results-quick.json -out out

## bench-netns-deps: install ip (iproute2) and iptables from Debian's packages for S9's network namespaces (root)
bench-netns-deps:
	@command -v ip >/dev/null && command -v iptables >/dev/null || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y iproute2 iptables; }

## bench-peers: install the peers the harness compares with (Redis, etcd, PostgreSQL); needs root
bench-peers:
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server etcd-server postgresql

# --- chaos harness (bench/chaos) ---------------------------------------------

.PHONY: chaos holder-faults

# Where the fenced writes of holder-faults and chaos land: memory, or a
# throwaway postgres or mariadb (make fence-deps installs them), e.g.
# make holder-faults HOLDER_FAULTS_STORE=postgres
HOLDER_FAULTS_STORE ?= memory
HOLDER_FAULTS_ROUNDS ?= 20
CHAOS_STORE ?= memory

## holder-faults: does the old holder stop before the next starts? Freezes, SIGSTOP, signals to monolockctl, force release; 20 rounds each (about 2-3 minutes; HOLDER_FAULTS_STORE=postgres|mariadb writes through a real database)
holder-faults: build
	cd bench && $(GO) run ./holderfaults -server $(abspath $(BIN))/monolock -ctl $(abspath $(BIN))/monolockctl -store $(HOLDER_FAULTS_STORE) -rounds $(HOLDER_FAULTS_ROUNDS)

## chaos: many clients through fault proxies, server restarts, fenced writes, then the checks (about 2 minutes; CHAOS_DURATION=5m for longer; CHAOS_STORE=postgres|mariadb writes through a real database)
chaos: build
	cd bench && $(GO) run ./chaos -build=false -server $(abspath $(BIN))/monolock -store $(CHAOS_STORE)

# --- adversarial harness (bench/adversarial) ---------------------------------

.PHONY: adversarial

## adversarial: each attack on the loop's fairness against the built server, with a canary, lock probes and /readyz probes (about 3 minutes, loopback only)
adversarial: build
	cd bench && $(GO) run ./adversarial -server $(abspath $(BIN))/monolock

# --- failover harness (bench/failover) ---------------------------------------

.PHONY: failover failover-deps failover-etcd failover-etcd-deps storm

## failover: the keepalived pair for real in network namespaces, four faults x 5 rounds, the table (root; about 3 minutes)
failover: build
	cd bench && $(GO) run ./failover -server $(abspath $(BIN))/monolock -scripts $(abspath deploy/keepalived)

## failover-deps: install what make failover needs (root): keepalived, iproute2, curl
failover-deps:
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y keepalived iproute2 curl

## failover-etcd: three etcd members and two monolock nodes with -ha-etcd in network namespaces, seven faults x 5 rounds, the table (root; about 7 minutes)
failover-etcd: build
	cd bench && $(GO) run ./failover-etcd -server $(abspath $(BIN))/monolock

## failover-etcd-deps: install what make failover-etcd needs (root): etcd-server, iproute2, iptables, curl
failover-etcd-deps:
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y etcd-server iproute2 iptables curl

## storm: a reconnect storm on loopback: 15,000 plain and 5,000 mutual-TLS sessions re-admitted by a second server, full vs resumed handshakes, with and without jitter (a few minutes)
storm: build
	cd bench && $(GO) run ./storm -server $(abspath $(BIN))/monolock
