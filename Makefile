# patchflow: the two commands a newcomer needs are `make demo` and `make test`.
# Everything else here is what they call, plus tools for contributors.

GO        ?= go
BUF       := $(GO) run github.com/bufbuild/buf/cmd/buf@v1.75.0
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
BIN       := bin
PKGS      := ./...

.PHONY: all build image lint-deploy test test-deploy test-kafka demo e2e nemesis bench docs fuzz kafka-up kafka-down proto proto-check lint vet fmt-check race bench-pipeline failover-reads txn-failover txn-failover-library clean

KAFKA_STATE := .cache/kafka-dir

all: build

## build: compile the commands into bin/
build:
	$(GO) build -o $(BIN)/ ./cmd/...

## image: the listener's OCI image from local files (deploy/container/Containerfile.local: a static
## binary built here on scratch with the host's CA bundle), with podman (installed when missing) or
## a docker daemon that answers; prints its name and size. deploy/container/Containerfile is the
## same image built anywhere a registry is in reach
image:
	.ci/image

## demo: the product end to end: a throwaway PostgreSQL (unless DATABASE_URL is set), the embedded
## broker, the platform mock, 20,000 realistic events, live progress and a checked summary, then the
## pipeline and one record at a time per partition measured in turn on 900 events each;
## DEMO_FLAGS for the demo's flags (e.g. DEMO_FLAGS='-events 4000 -hosts 1000')
demo:
	.ci/postgres with $(GO) run ./cmd/demo $(DEMO_FLAGS)

## test: generated code current, lint, vet, formatting, then every test with the race detector,
## against a throwaway PostgreSQL unless DATABASE_URL names one
test: proto-check fmt-check vet lint
	PATCHFLOW_REQUIRE_DB=1 .ci/postgres with $(GO) test -race -count=1 $(PKGS)

## test-deploy: the deployment's modules (manifests decoded strictly against Kubernetes' and
## Clowder's schemas, alert rules under promtool); out of make test because building promtool
## cold takes minutes on a newcomer's machine; .ci/run runs it after make test
test-deploy:
	@for m in $(DEPLOY_MODULES); do echo "deploy module $$m"; (cd $$m && $(GO) vet ./... && $(GO) test -timeout 30m -count=1 ./...) || exit 1; done

## fuzz: the longer runs of what make test samples: the model of the retry rule over FUZZ_CHECKS
## schedules (make test draws 100), the rule's other properties, and each fuzz target for FUZZ_TIME
FUZZ_CHECKS ?= 20000
FUZZ_TIME ?= 30s
fuzz:
	$(GO) test -count=1 -timeout 60m -run 'TestModel|TestCaseCountsOnlyItsEvidence' ./actors/blame -rapid.checks=$(FUZZ_CHECKS)
	@for t in $$(grep -rl '^func Fuzz' --include=*_test.go . | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -h '^func Fuzz' $$t/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzz $$t $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZ_TIME) $$t || exit 1; \
		done; \
	done

## the deployment's own Go modules (their tests' dependencies stay out of the product's go.mod):
## manifests decoded strictly and rendered, alert rules under promtool
DEPLOY_MODULES := deploy/kubernetes deploy/prometheus

## lint-deploy: staticcheck on the deployment's modules (their tests only; kept out of make test,
## where analysing Kubernetes' and Prometheus' dependency trees cold would cost minutes of CI)
lint-deploy:
	@for m in $(DEPLOY_MODULES); do (cd $$m && $(STATICCHECK) ./...) || exit 1; done

## test-kafka: the checks that need a real Kafka broker (a transactional producer against
## read_committed, the dead-letter topic's size limits, commit metadata read back by the next
## owner, the brokers' offset.metadata.max.bytes), against a throwaway broker on
## 127.0.0.1:$${KAFKA_PORT:-19092}; `make test` runs the same checks on the in-process broker
test-kafka:
	@set -e; \
	kafka=$$(.ci/kafka start); trap '.ci/kafka down '"$$kafka" EXIT; \
	PATCHFLOW_KAFKA_BROKERS=$$(cat $$kafka/brokers) PATCHFLOW_KAFKA_VERSION=$$(cat $$kafka/version) \
	$(GO) test -race -count=1 -v -run RealBroker ./actors ./consumer

## e2e: the fault-injection suite against a real Kafka broker (KRaft, from Maven Central) and a
## throwaway PostgreSQL: crash loop (each kill measured: in flight, evaluations redone, finished records
## run again, commit metadata), a clean run, group churn, broker restart, database outage, VMaaS trouble,
## poison, SASL, hostage (hosts whose VMaaS calls hang: dead-lettered within the own-failure bound) and
## revoke-starved (a member joins while the database is down: revoked claims drain within the drain timeout),
## effects-rollback (every commit that wrote to the outbox fails for 8 s: no message of a rolled-back
## transaction reaches the topics, none committed is lost; every scenario reads its effect topics back),
## locked-table and locked-table-1p (the system table locked 20 s, 8 partitions, and 1 in partition order:
## nothing dead-lettered, throughput back within 1 s of the release), vmaas-outage (10 s of 503s at 50 ms
## calls, 40,000 events: nothing dead-lettered, throughput back within 1 s),
## image (listeners run from make image's image: one stopped by the engine drains and exits 0 inside the
## grace, one killed is recovered by the next); then, on a three-node cluster (.ci/kafka-cluster: replication factor 3, min.insync.replicas 2) with a
## fault proxy on every listener link: leader-loss, rolling-restart, partitioned, coordinator-cut, zombie, slow-network and
## db-link-resets; then, on the single broker, the checks of make test-kafka. E2E_SCENARIOS=crash-loop,clean runs only those;
## E2E_BIN=dir runs the listener binary in dir (another build, to compare); E2E_LISTENER_ENV=NAME=value,...
## adds settings to every listener
E2E_BIN ?= $(CURDIR)/$(BIN)
e2e: build
	@set -e; \
	work=$$(mktemp -d /tmp/patchflow-e2e.XXXXXX); \
	image=$$(.ci/image); \
	pg=$$(.ci/postgres start); trap '.ci/postgres stop '"$$pg" EXIT; \
	kafka=$$(.ci/kafka start); trap '.ci/kafka down '"$$kafka"'; .ci/postgres stop '"$$pg" EXIT; \
	cluster=$$(.ci/kafka-cluster start); \
	trap '.ci/kafka-cluster down '"$$cluster"'; .ci/kafka down '"$$kafka"'; .ci/postgres stop '"$$pg" EXIT; \
	E2E_BROKERS=$$(cat $$kafka/brokers) E2E_DATABASE_URL=$$(cat $$pg/url) E2E_BIN=$(E2E_BIN) E2E_CI=$(CURDIR)/.ci \
	E2E_IMAGE=$$image E2E_CONTAINER_ENGINE=$$(.ci/image --engine) \
	E2E_KAFKA_DIR=$$kafka E2E_PG_DIR=$$pg E2E_WORK=$$work E2E_CLUSTER_DIR=$$cluster \
	E2E_SASL_BROKERS=$$(cat $$kafka/brokers-sasl) E2E_SASL_PASSWORD=patchflow-test-secret \
	E2E_BROWSER=$$(command -v chromium || true) E2E_SCREENSHOT=$(CURDIR)/docs/status.png $(GO) run ./cmd/e2e; \
	PATCHFLOW_KAFKA_BROKERS=$$(cat $$kafka/brokers) PATCHFLOW_KAFKA_VERSION=$$(cat $$kafka/version) \
	$(GO) test -race -count=1 -run RealBroker ./actors ./consumer

## nemesis: a seeded random schedule of faults (brokers killed and restarted, a listener cut off from a
## broker, slow and thin links, PostgreSQL links reset, listeners killed, ended and stopped, VMaaS trouble)
## on the three-node cluster for NEMESIS_DURATION, three listeners and a steady stream the whole time;
## then every check of the e2e suite, and per fault the records repeated, what was at risk, the stall after
## it healed; the steady listener's memory. NEMESIS_SEED=n replays a schedule (0: a new seed, printed first)
NEMESIS_SEED ?= 0
NEMESIS_DURATION ?= 5m
nemesis: build
	@set -e; \
	work=$$(mktemp -d /tmp/patchflow-nemesis.XXXXXX); \
	pg=$$(.ci/postgres start); trap '.ci/postgres stop '"$$pg" EXIT; \
	cluster=$$(.ci/kafka-cluster start); \
	trap '.ci/kafka-cluster down '"$$cluster"'; .ci/postgres stop '"$$pg" EXIT; \
	NEMESIS_SEED=$(NEMESIS_SEED) NEMESIS_DURATION=$(NEMESIS_DURATION) E2E_SCENARIOS=nemesis \
	E2E_BROKERS=unused E2E_DATABASE_URL=$$(cat $$pg/url) E2E_BIN=$(E2E_BIN) E2E_CI=$(CURDIR)/.ci \
	E2E_WORK=$$work E2E_CLUSTER_DIR=$$cluster $(GO) run ./cmd/e2e

## failover-reads: on a three-node cluster of its own, kill the group coordinator 4 times while one client
## commits and two read the committed offset, with and without require_stable; fails if a stable read answers
## below an acknowledged commit (the unstable ones do: docs/reliability.md); about 2 minutes
failover-reads:
	@set -e; cluster=$$(.ci/kafka-cluster start); trap '.ci/kafka-cluster down '"$$cluster" EXIT; \
	.ci/kafka-cluster topic $$cluster failover 1; \
	$(GO) run ./cmd/failover-reads -cluster $$cluster

## txn-failover: on a three-node cluster of its own, sarama's transactional producer in a consume-transform-produce
## loop (4 partitions, one producer each) while the transaction coordinator, the group coordinator and a leader are
## killed by turns; fails on an output record missing or duplicated under read_committed, or a partition that stops
txn-failover:
	@set -e; cluster=$$(.ci/kafka-cluster start); trap '.ci/kafka-cluster down '"$$cluster" EXIT; \
	.ci/kafka-cluster topic $$cluster txn-in 4; .ci/kafka-cluster topic $$cluster txn-out 4; \
	$(GO) run ./cmd/txn-failover -cluster $$cluster $(TXN_FAILOVER_FLAGS)

## txn-failover-library: the same faults and checks with the loop run by the consumer library's transactional mode
## (consumer.CommitTransactional: 8 records in flight, 10 ms each, 80,000 records)
txn-failover-library:
	@$(MAKE) --no-print-directory txn-failover TXN_FAILOVER_FLAGS="-library -per-partition 20000"

## kafka-up: start a real Kafka broker on 127.0.0.1:$${KAFKA_PORT:-19092} (fetched with Maven once) with the
## topic of inventory events, $(KAFKA_TOPIC) in $(KAFKA_PARTITIONS) partitions (the broker creates no topic on
## first use); it prints the plaintext and SASL addresses and the SASL test user; kafka-down stops it
KAFKA_TOPIC ?= platform.inventory.events
KAFKA_PARTITIONS ?= 8
kafka-up:
	@mkdir -p $(dir $(KAFKA_STATE))
	@if [ -f $(KAFKA_STATE) ]; then echo "a broker is already up: $$(cat $(KAFKA_STATE))"; exit 1; fi
	@dir=$$(.ci/kafka start) && echo $$dir > $(KAFKA_STATE) && \
	if ! .ci/kafka topic $$dir $(KAFKA_TOPIC) $(KAFKA_PARTITIONS) 2>$$dir/topic.log; then \
		cat $$dir/topic.log >&2; .ci/kafka down $$dir; rm -f $(KAFKA_STATE); echo "could not create topic $(KAFKA_TOPIC); broker stopped" >&2; exit 1; fi; \
	echo "Kafka at $$(cat $$dir/brokers) (plaintext), log $$dir/server.log"; \
	echo "topic $(KAFKA_TOPIC): $(KAFKA_PARTITIONS) partitions (the listener creates $(KAFKA_TOPIC).dlq itself)"; \
	echo "SASL at $$(cat $$dir/brokers-sasl) (SASL_PLAINTEXT: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN), test-only user $${KAFKA_SASL_TEST_USER:-patchflow}, password $${KAFKA_SASL_TEST_PASSWORD:-patchflow-test-secret}"; \
	echo "stop it with: make kafka-down"

kafka-down:
	@if [ -f $(KAFKA_STATE) ]; then .ci/kafka down $$(cat $(KAFKA_STATE)); rm -f $(KAFKA_STATE); echo "Kafka stopped"; else echo "no broker up"; fi

## docs: rewrite the settings tables of docs/configuration.md from the settings' definitions (the
## text between its GENERATED markers); make test fails while they differ (proving/docs)
docs:
	$(GO) run ./cmd/docgen

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

## lint: staticcheck, pinned, built from the module proxy on first use
lint:
	$(STATICCHECK) $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench: the benchmark report: scenarios 1-3 on the in-process broker and a real Kafka broker, end to
## end with a throwaway PostgreSQL at its default durability (PATCHFLOW_PG_DURABLE=1: fsync and
## synchronous_commit on) beside the listener before issue 12 ($(BENCH_BEFORE12)), memory under a backlog and
## behind a record that never finishes, crash replay (kill -9 and restart); the last two beside the listener
## before issue 11 ($(BENCH_BEFORE)), reads on 50,000 systems, and the adaptive limit against a downstream
## with a capacity; writes docs/benchmarks.md, .json, throughput.png and adaptive.png. BENCH_FLAGS=-quick for a
## smoke run, BENCH_FLAGS=-only=crash-replay (core, end-to-end, memory, pinned, crash-replay, reads, adaptive, start, hostile)
## for some, BENCH_FLAGS='-only=end-to-end,adaptive -merge docs/benchmarks.json' to measure those again into
## the report (it says which run measured what)
bench: build $(BIN)/listener-before $(BIN)/listener-before12 $(BIN)/listener-before37 $(PEER_JAR)
	@set -e; \
	kafka=$$(.ci/kafka start); trap '.ci/kafka down '"$$kafka" EXIT; \
	PATCHFLOW_PG_DURABLE=1 .ci/postgres with $(GO) run ./cmd/bench -out docs -listener $(BIN)/listener-proving -listener-before $(BIN)/listener-before \
		-listener-before12 $(BIN)/listener-before12 -listener-before37 $(BIN)/listener-before37 -platform-mock $(BIN)/platform-mock \
		-peer-jar $(PEER_JAR) -kafka $$(cat $$kafka/brokers) -kafka-version $$(cat $$kafka/version) -kafka-pid $$(cat $$kafka/pid) $(BENCH_FLAGS)

## the peer of scenario 12: Confluent Parallel Consumer's harness, built with Maven (Maven Central only)
PEER_JAR := proving/peer/target/peer-bench.jar
$(PEER_JAR): proving/peer/pom.xml $(shell find proving/peer/src -name '*.java')
	cd proving/peer && mvn -q -B package

## the listener at the commit before issue 11, with the simulated handler's measurement knobs
BENCH_BEFORE := b42bd18
$(BIN)/listener-before: .ci/listener-before .ci/listener-before.patch
	GO=$(GO) .ci/listener-before $@ $(BENCH_BEFORE)

## the listener at the commit before issue 12, as it was (the end-to-end scenario runs its real handler)
BENCH_BEFORE12 := 15648dc
$(BIN)/listener-before12: .ci/listener-before
	GO=$(GO) .ci/listener-before $@ $(BENCH_BEFORE12) none

## the listener at the commit before issue 37, as it was (the hostile-input scenario runs its real handler)
BENCH_BEFORE37 := 0661fe1
$(BIN)/listener-before37: .ci/listener-before
	GO=$(GO) .ci/listener-before $@ $(BENCH_BEFORE37) none

## bench-pipeline: the pipeline benchmark on the embedded broker (10 ms and 100 ms handlers, S=64, 8 partitions)
bench-pipeline:
	$(GO) test ./actors -run '^$$' -bench Pipeline -benchtime 100000x -count 1

clean:
	rm -rf $(BIN)
