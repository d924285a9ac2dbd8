# patchflow: the two commands a newcomer needs are `make demo` and `make test`.
# Everything else here is what they call, plus tools for contributors.

GO        ?= go
BUF       := $(GO) run github.com/bufbuild/buf/cmd/buf@v1.75.0
BIN       := bin
PKGS      := ./...

.PHONY: all build test demo proto proto-check lint vet fmt-check race bench-pipeline clean

all: build

## build: compile the commands into bin/
build:
	$(GO) build -o $(BIN)/ ./cmd/...

## demo: the product end to end: a throwaway PostgreSQL (unless DATABASE_URL is set), the embedded
## broker, the platform mock, 20,000 realistic events, live progress and a checked summary
demo:
	@set -e; \
	if [ -z "$$DATABASE_URL" ]; then \
		dir=$$(.ci/postgres start); trap '.ci/postgres stop '"$$dir" EXIT; \
		export DATABASE_URL=$$(cat $$dir/url); \
		echo "throwaway PostgreSQL at $$DATABASE_URL"; \
	fi; \
	$(GO) run ./cmd/demo

## test: generated code current, lint, vet, formatting, then every test with the race detector,
## against a throwaway PostgreSQL unless DATABASE_URL names one
test: proto-check fmt-check vet
	@set -e; \
	if [ -z "$$DATABASE_URL" ]; then \
		dir=$$(.ci/postgres start); trap '.ci/postgres stop '"$$dir" EXIT; \
		export DATABASE_URL=$$(cat $$dir/url); \
		echo "throwaway PostgreSQL at $$DATABASE_URL"; \
	fi; \
	PATCHFLOW_REQUIRE_DB=1 $(GO) test -race -count=1 $(PKGS)

## proto: regenerate messages/*.pb.go from proto/ (buf and protoc-gen-go via `go run`, pinned)
proto:
	$(BUF) lint
	rm -f messages/*.pb.go
	$(BUF) generate

## proto-check: fail when buf lint fails or messages/*.pb.go is stale
proto-check:
	$(BUF) lint
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	$(BUF) generate -o $$tmp && \
	for f in $$tmp/messages/*.pb.go; do \
		cmp -s $$f messages/$$(basename $$f) || { echo "messages/$$(basename $$f) is stale: run make proto"; exit 1; }; \
	done && \
	for f in messages/*.pb.go; do \
		[ -f $$tmp/messages/$$(basename $$f) ] || { echo "$$f has no .proto source: run make proto"; exit 1; }; \
	done && echo "generated code is current"

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench-pipeline: the pipeline benchmark on the embedded broker (10 ms and 100 ms handlers, S=64, 8 partitions)
bench-pipeline:
	$(GO) test ./actors -run '^$$' -bench Pipeline -benchtime 100000x -count 1

clean:
	rm -rf $(BIN)
