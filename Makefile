# monolock — the two commands a newcomer needs are `make run` and `make test`.

GO       ?= go
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 5m

.PHONY: all build run test lint vet fmt-check staticcheck fuzz fuzz-short bench-micro clean

all: build

## build: compile every command into bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

## run: build and start the server on its defaults (0.0.0.0:7070)
run: build
	./$(BIN)/monolock

## test: vet, formatting, the whole suite under the race detector, short fuzz runs
test: vet fmt-check
	$(GO) test -race -count=1 -timeout 8m ./...
	$(MAKE) --no-print-directory fuzz-short

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

staticcheck:
	$(GO) run $(STATICCHECK) ./...

## lint: vet, gofmt and staticcheck
lint: vet fmt-check staticcheck

# A few seconds of each fuzz target as part of `make test`.
fuzz-short:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeClient$$' -fuzztime 4s ./protocol/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeServer$$' -fuzztime 4s ./protocol/

## fuzz: long fuzz runs (FUZZTIME each, default 5m)
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeClient$$' -fuzztime $(FUZZTIME) ./protocol/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeServer$$' -fuzztime $(FUZZTIME) ./protocol/

## bench-micro: the testing.B benchmarks of the hot paths, with allocations
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem ./protocol/ ./locktable/ ./eventloop/...

clean:
	rm -rf $(BIN)
