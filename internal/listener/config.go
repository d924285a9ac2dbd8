// Package listener wires the patchflow listener process: configuration from
// environment and flags, the Kafka consumer-group members, the dead-letter
// producer, the actor system and the handler. cmd/listener and cmd/demo are
// thin mains over it.
package listener

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/limit"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/internal/kafkaflags"
	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/internal/telemetry"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/persistence"
)

// EmbeddedBrokers is the KAFKA_BROKERS value that starts an in-process
// broker, in a build whose Extension provides one (cmd/listener-proving).
const EmbeddedBrokers = "embedded"

// Config is the listener's configuration.
type Config struct {
	Brokers   []string // empty when Embedded
	Embedded  bool
	Kafka     actors.KafkaSettings
	Consumers int
	Pipeline  actors.Settings

	// Handler is "evaluate" (the domain handler: PostgreSQL and VMaaS) or
	// the name of an Extension's handler.
	Handler string
	Domain  DomainConfig

	HTTPAddr string
	// HTTP bounds the server at HTTPAddr.
	HTTP consumer.HTTPLimits
	// Pprof serves /debug/pprof/ at HTTPAddr too.
	Pprof bool
	// TracesExporter is where handler attempts' spans go (TracesExporters).
	TracesExporter string
	// ReleaseToken, when set, serves the operator's release of a failing
	// record at HTTPAddr (consumer.WithRelease), guarded by it.
	ReleaseToken  string
	ReadyPinLimit time.Duration
	// ReadyDBGrace is how long the database check must fail without a
	// break before the process reports not ready.
	ReadyDBGrace time.Duration
	// ReadyVMaaSGrace is ReadyDBGrace for the VMaaS check.
	ReadyVMaaSGrace time.Duration

	// MaxDecompressedBatchBytes bounds what one fetched record batch may
	// decompress to (consumer.Config.MaxDecompressedBatchBytes): by default
	// DecompressedBatchFactor × the domain's MaxMessageBytes.
	MaxDecompressedBatchBytes int

	// extensions are what Parse was given beyond the product.
	extensions       []Extension
	ProgressInterval time.Duration
	LogLevel         string
	LogFormat        string
	// MemoryLimit is the container's memory limit in bytes (0: read the
	// cgroup's); the Go runtime's soft limit is 90 % of it (applyMemoryLimit).
	MemoryLimit int
}

// Parse reads the configuration from lookup (the environment) and args (the
// flags, which win). It returns settings.ErrHelp for -h, or an error naming
// the bad setting.
//
// exts add their settings and handlers (the proving ground's build); the
// product passes none.
func Parse(args []string, lookup func(string) (string, bool), exts ...Extension) (*Config, *settings.Set, error) {
	var (
		brokers, topic, group, dlq, version, assignor, order, isolation, concurrency, law string
		cfg                                                                               Config
		inFlightMB                                                                        int
	)
	def := actors.DefaultSettings()
	p := &cfg.Pipeline
	s := settings.New("listener")
	cfg.extensions = exts
	kafkaflags.BrokersSetting(s, &brokers, "comma-separated `host:port` list of Kafka brokers"+embeddedUsage(exts)+". "+
		"No scheme and no credentials (`user:password@` is refused, shown masked): SASL logs in with the settings below")
	s.String(&topic, "KAFKA_TOPIC", "kafka-topic", kafkaflags.DefaultTopic, "topic of inventory events", nonEmpty)
	s.String(&group, "KAFKA_GROUP", "kafka-group", "patchflow-listener", "consumer group id", nonEmpty)
	s.String(&dlq, "KAFKA_DLQ_TOPIC", "kafka-dlq-topic", "", "dead-letter topic, other than `KAFKA_TOPIC`; created at start if missing, with the source topic's partition count and room for its largest record", nil)
	s.ShowDefault("kafka-dlq-topic", "`KAFKA_TOPIC` + `.dlq`")
	s.String(&version, "KAFKA_VERSION", "kafka-version", "3.6.0", "Kafka protocol version to speak: at least 0.11.0 (record headers, idempotent writes, `read_committed`), at least 2.4.0 for cooperative rebalancing", checkVersion)
	s.String(&assignor, "KAFKA_ASSIGNOR", "kafka-assignor", "cooperative-sticky", "partition assignment: `cooperative-sticky` keeps the partitions that stay with a member running through a rebalance; `sticky`, `range` and `roundrobin` are eager (every rebalance drains every partition)", oneOf(actors.Assignors))
	s.String(&isolation, "KAFKA_ISOLATION_LEVEL", "kafka-isolation-level", actors.IsolationLevels[0], "how transactional topics are read. `read_committed`: only records of committed transactions are processed; records of aborted transactions never are, and records of an open transaction wait until it ends. `read_uncommitted`: every record, aborted or not. Both are the same for a topic written without transactions", oneOf(actors.IsolationLevels))
	s.Duration(&cfg.Kafka.CommitInterval, "KAFKA_COMMIT_INTERVAL", "kafka-commit-interval", actors.DefaultCommitInterval, time.Millisecond, "how often the marked offsets and their commit metadata are committed, only when one changed (and always at the end of a claim). A crash replays what was in flight plus what finished since the last commit: at 10,000 records/s, sarama's usual second would be up to 10,000 records handled twice")
	s.Duration(&cfg.Kafka.SessionTimeout, "KAFKA_SESSION_TIMEOUT", "kafka-session-timeout", 10*time.Second, time.Second, "how long the group waits for a silent member (a crashed process) before moving its partitions")
	s.Duration(&cfg.Kafka.HeartbeatInterval, "KAFKA_HEARTBEAT_INTERVAL", "kafka-heartbeat-interval", 3*time.Second, 100*time.Millisecond, "how often a member tells the group it is alive; at most a third of `KAFKA_SESSION_TIMEOUT`")
	s.Int(&cfg.MaxDecompressedBatchBytes, "KAFKA_MAX_DECOMPRESSED_BATCH_BYTES", "kafka-max-decompressed-batch-bytes", 0, 0,
		fmt.Sprintf("largest a fetched record batch may decompress to (`0`: %d × `MAX_MESSAGE_BYTES`, at least 8 MiB). "+
			"A batch past it (a compression bomb: a few KB on the broker, hundreds of MB decompressed) is never held whole: no fetch can read it, so each of its offsets is dead-lettered by itself (`batch over the decompression limit`, without key or value), and the partition goes on past them once the group's member has rejoined. "+
			"Keep it above the producers' largest batch, uncompressed (their batch size, or their largest record when larger), and at or above their zstd window (8 MiB for Kafka's producers at zstd levels 17 to 19, 2 MiB at the default level): a batch of ordinary records past it, or a zstd frame whose window is, is dead-lettered the same way. "+
			"It bounds one batch, not a fetch of many small ones (docs/deploy.md, \"Compressed batches\"); it is process-wide", DecompressedBatchFactor))
	s.ShowDefault("kafka-max-decompressed-batch-bytes", fmt.Sprintf("%d × `MAX_MESSAGE_BYTES`, at least 8 MiB", DecompressedBatchFactor))
	sec := &cfg.Kafka.Security
	kafkaflags.Security(s, sec)
	s.Int(&cfg.Consumers, "LISTENER_CONSUMERS", "consumers", 1, 1, "consumer-group members (M) in the process; they share the process-wide limit G")
	s.Int(&p.InFlightPerPartition, "LISTENER_INFLIGHT_PER_PARTITION", "inflight-per-partition", def.InFlightPerPartition, 1, "records admitted and not finished per partition (S), held-back ones included")
	s.Int(&p.InFlightTotal, "LISTENER_INFLIGHT_TOTAL", "inflight-total", def.InFlightTotal, 1, "records admitted and not finished in the whole process (G): the limit with `LISTENER_CONCURRENCY=fixed`, the adaptive limit's ceiling otherwise")
	s.Int(&inFlightMB, "LISTENER_INFLIGHT_MB", "inflight-mb", int(def.InFlightBytes>>20), 0, "MiB the records in flight in the whole process may weigh, decoded and handled as the handler counts them (the evaluating handler weighs an event at its size plus 12 times its value: a 999 KB event about 13 MiB; VMaaS and inventory answers have `ANSWERS_MB` of their own): admission waits, first come first served, while the next record does not fit; one heavier than the whole budget runs alone; a record waiting for the evidence of its failure lends its bytes to the records that run meanwhile (then at most twice the budget runs). With sarama's buffers, the read-ahead and the clients' answers it keeps the listener within its pod's memory (docs/reliability.md, \"Hostile input\"). `0`: no byte bound, only the record counts")
	s.String(&concurrency, "LISTENER_CONCURRENCY", "concurrency", def.Concurrency.String(), "how the process-wide limit is set. `adaptive`: it moves between `LISTENER_CONCURRENCY_FLOOR` and G from the handler's latency against its no-load baseline and from transient failures (docs/architecture.md, \"Adaptive concurrency\"). `fixed`: it is G. S stays a hard limit per partition either way", oneOf([]string{"adaptive", "fixed"}))
	s.Int(&p.ConcurrencyFloor, "LISTENER_CONCURRENCY_FLOOR", "concurrency-floor", def.ConcurrencyFloor, 1, "the adaptive limit never goes below this (nor above G; a floor over G is G)")
	s.String(&law, "LISTENER_CONCURRENCY_LAW", "concurrency-law", def.ConcurrencyLaw.String(), "the adaptive limit's control law: `gradient`, `vegas` or `aimd` (docs/architecture.md, \"Adaptive concurrency\"); `make bench` compares them", oneOf([]string{"gradient", "vegas", "aimd"}))
	s.Float(&p.ConcurrencyTolerance, "LISTENER_CONCURRENCY_TOLERANCE", "concurrency-tolerance", def.ConcurrencyTolerance, 1, limit.MaxTolerance, "how many times its no-load latency the handler may take before the adaptive limit counts a queue. `1` keeps it near the no-load latency: the limit settles at the downstream's knee, past which more in flight mostly queues. More (`1.25`, Envoy's adaptive concurrency default; `1.5`, Netflix Gradient2's) buys the throughput a downstream whose throughput still rises past the knee gives (one sharing the listener's cores, one that batches), for latency, and follows a falling capacity less closely: docs/benchmarks.md measures 1, 1.25 and 1.5")
	s.Int(&p.SpanPerPartition, "LISTENER_SPAN_PER_PARTITION", "span-per-partition", 0, 0, fmt.Sprintf("offsets a partition may admit past its oldest unfinished record (`0`: %d × S, else at least S): a record that pins the watermark stops admission this many offsets past it (span-blocked: on `/status`, in `/readyz`'s reason, `patchflow_partition_span_blocked`). Memory does not grow with it; it bounds how far a partition runs ahead of its committed offset, and so what a lost commit metadata would replay", actors.DefaultSpanFactor))
	s.Int(&p.CommitMetadataMaxBytes, "LISTENER_COMMIT_METADATA_MAX_BYTES", "commit-metadata-max-bytes", def.CommitMetadataMaxBytes, 0, "largest commit metadata: the offsets finished above the committed one, so that after a crash or a handover only what was unfinished runs again. Lowered at start to the brokers' `offset.metadata.max.bytes` (4,096 by default) when that is smaller and can be read, since a broker refuses the whole commit when the metadata passes it; otherwise keep it at or below theirs. Longer metadata speaks of fewer offsets, never blocks. `0`: none, only the committed offset survives")
	s.String(&order, "LISTENER_ORDERING", "ordering", def.Ordering.String(), "ordering within a partition. `key`: one record per Kafka key at a time, in offset order (records without a key run freely). `partition`: one record per partition at a time. `unordered`: none", oneOf([]string{"key", "partition", "unordered"}))
	s.Duration(&p.DrainTimeout, "LISTENER_DRAIN_TIMEOUT", "drain-timeout", def.DrainTimeout, 100*time.Millisecond, "at the end of a claim, how long in-flight records may finish; handlers are cancelled a tenth before it (at most 2 s) so they return before the partition moves. sarama's rebalance timeout is set to at least this plus 12 s")
	s.Int(&p.MaxAttempts, "LISTENER_MAX_ATTEMPTS", "max-attempts", def.MaxAttempts, 1, "a record's own failures before it is dead-lettered: failures judged its own because other records' calls to the dependency it names (or, naming none, the other records) were served just after them (docs/architecture.md, \"Whose failure\"). A shared outage (database down, VMaaS 503 for everyone) does not count and is retried until it passes; a failure nothing can judge holds the record, reported, never dead-lettered on a guess")
	s.Duration(&p.AttemptTimeout, "LISTENER_ATTEMPT_TIMEOUT", "attempt-timeout", def.AttemptTimeout, 0, "deadline of one handler attempt (`0`: none). With `LISTENER_MAX_ATTEMPTS`, `LISTENER_BACKOFF_MAX` and `LISTENER_EVIDENCE_WINDOW` it bounds how long a record failing on its own holds its partition: `MAX_ATTEMPTS × (ATTEMPT_TIMEOUT + max(BACKOFF_MAX, EVIDENCE_WINDOW))` (10 min 50 s by default). A handler still running a grace past it (a tenth of it, 1 to 30 s) is reported: a warning naming the record, and `patchflow_attempts_overdue`. Keep it well above normal handler times, database queueing included, or slow attempts under load count as own failures")
	s.Duration(&p.BackoffMin, "LISTENER_BACKOFF_MIN", "backoff-min", def.BackoffMin, time.Millisecond, "first retry wait; doubles per attempt, jittered in its upper half")
	s.Duration(&p.BackoffMax, "LISTENER_BACKOFF_MAX", "backoff-max", def.BackoffMax, time.Millisecond, "longest retry wait, not below `LISTENER_BACKOFF_MIN` (also between dead-letter write retries)")
	s.Duration(&p.EvidenceWindow, "LISTENER_EVIDENCE_WINDOW", "evidence-window", def.EvidenceWindow, time.Millisecond, "how long after a record's failure other records' calls to the same dependency, and its health checks, count as evidence of whose failure it was: its own (others served: it counts towards `LISTENER_MAX_ATTEMPTS`) or shared (others failing too: it never counts). A dependency whose served calls take longer gets twice their mean time. Keep it above the health checks' 1 s interval")
	handlers, handlerHelp := handlerNames(exts)
	s.String(&cfg.Handler, "LISTENER_HANDLER", "handler", "evaluate", "`evaluate`: store and evaluate events (needs `DATABASE_URL` and `VMAAS_URL`)"+handlerHelp, oneOf(handlers))
	var reporters, excluded string
	d := &cfg.Domain
	s.SecretURL(&d.DatabaseURL, "DATABASE_URL", "database-url", "PostgreSQL connection, in either of lib/pq's forms: a `postgres://` or `postgresql://` URL that names its host "+
		"(`postgres://user:password@host:5432/database?sslmode=verify-full`; a Unix socket as `postgres:///database?host=/run/postgresql`), "+
		"with the password's special characters percent-encoded (`@` `:` `/` `?` `#` `%` `&`, spaces: `p@ss` as `p%40ss`); "+
		"or a libpq key=value string (`host=db user=patch password='p@ss w0rd' dbname=patch`), a value with spaces or quotes in single quotes. "+
		"TLS through `sslmode`, `sslrootcert`, `sslcert`, `sslkey`; `connect_timeout` (seconds) bounds opening a connection, 5 s when unset or 0. Checked at start as lib/pq will read it (the `PG*` environment variables included): "+
		"another scheme, a URL without a host, a bad port or escape, an `@` after the host (an unescaped password), a bad value are settings errors (exit code 2). "+
		"The password (of the user info, or `password=`) is shown as `xxxxx` wherever settings are printed and in every error", persistence.CheckURL)
	s.ShowDefault("database-url", "(required by `evaluate`)")
	s.Int(&d.Pool.MaxOpen, "DB_MAX_OPEN_CONNS", "db-max-open-conns", 32, 1, "database connections open at most: bounds database concurrency below the pipeline's. The readiness check has one more connection of its own")
	s.Int(&d.Pool.MaxIdle, "DB_MAX_IDLE_CONNS", "db-max-idle-conns", 32, 0, "database connections kept idle")
	s.Duration(&d.Pool.MaxLifetime, "DB_CONN_MAX_LIFETIME", "db-conn-max-lifetime", 30*time.Minute, 0, "recycle database connections after this long (`0`: never)")
	s.Duration(&d.Pool.IdleInTransaction, "DB_IDLE_IN_TRANSACTION_TIMEOUT", "db-idle-in-transaction-timeout", persistence.DefaultIdleInTransaction, 0,
		"the server ends a session of the listener's pool that stays idle inside a transaction this long (`idle_in_transaction_session_timeout`, `0`: the server's own). "+
			"A listener paused mid-transaction (a stopped VM, a long GC) holds row locks every other listener's writes wait on; the listener never pauses inside its own transactions. "+
			"A value in `DATABASE_URL` wins")
	s.Int(&d.Pool.IDCacheSize, "DB_ID_CACHE_SIZE", "db-id-cache-size", persistence.DefaultIDCacheSize, 1,
		"ids of packages and of advisories (each) kept in memory, so an event whose packages were seen before looks none of them up, with their names by id for the relay's rendering of remediations; about 320 bytes an entry (64 MB for 200,000 packages)")
	s.Bool(&d.Pool.Prepared, "DB_PREPARED_STATEMENTS", "db-prepared-statements", true,
		"prepare the statements every event runs once on each database connection, so PostgreSQL parses and plans them once per connection, not per call (planning was about a quarter of its CPU per re-check-in). "+
			"Turn off behind a pooler in transaction mode that does not track prepared statements (PgBouncer before 1.21, or with `max_prepared_statements = 0`): there a call could run another connection's statement of the same name")
	fx := &d.Effects
	s.Bool(&fx.Kinds.Remediations, "REMEDIATIONS", "remediations", true,
		"publish each host's remediation state (its advisories and installable update NEVRAs) when an evaluation changes it, to `REMEDIATIONS_TOPIC`, through the outbox (docs/architecture.md, \"Effects: the outbox\")")
	s.String(&fx.RemediationsTopic, "REMEDIATIONS_TOPIC", "remediations-topic", DefaultRemediationsTopic, "topic of the remediation state messages (keyed by host id)", nonEmpty)
	s.Bool(&fx.Kinds.Notifications, "NOTIFICATIONS", "notifications", true,
		"notify each org once per advisory that becomes installable on one of its hosts (platform notification v1.1.0, `new-advisory`), to `NOTIFICATIONS_TOPIC`, through the outbox")
	s.String(&fx.NotificationsTopic, "NOTIFICATIONS_TOPIC", "notifications-topic", DefaultNotificationsTopic, "topic of the notifications (keyed by org id)", nonEmpty)
	s.Bool(&fx.Kinds.PayloadStatus, "PAYLOAD_TRACKER", "payload-tracker", true,
		"report `received`, then `success` or `error` with the reason, for each upload carrying a `request_id` and an `org_id`, to `PAYLOAD_TRACKER_TOPIC`, through the outbox")
	s.String(&fx.PayloadStatusTopic, "PAYLOAD_TRACKER_TOPIC", "payload-tracker-topic", DefaultPayloadStatusTopic, "topic of the payload statuses (keyed by host id, so one host's come in order)", nonEmpty)
	s.Duration(&fx.Interval, "OUTBOX_INTERVAL", "outbox-interval", time.Second, 10*time.Millisecond,
		"the outbox relay publishes at least this often, besides at each commit that wrote to the outbox (LISTEN/NOTIFY); it also reads the backlog (`patchflow_outbox_pending`, `patchflow_outbox_oldest_seconds`) this often")
	s.Int(&fx.Batch, "OUTBOX_BATCH", "outbox-batch", 500, 1, "most outbox messages one relay round claims and publishes")
	s.Duration(&fx.Linger, "OUTBOX_LINGER", "outbox-linger", 100*time.Millisecond, 0,
		"least time between the starts of two relay rounds that commits ask for: a commit sooner waits for it, so one round publishes what several commits wrote (each round costs a database transaction and a produce request per topic, whatever it carries). It adds at most this to a message's time in the outbox; a round after a full one does not wait. `0`: a round at each commit")
	s.Duration(&d.Pool.DeletedTTL, "DELETED_SYSTEM_TTL", "deleted-system-ttl", 24*time.Hour, time.Minute, "how long a deleted host is remembered, so a late event for it does not resurrect it")
	s.SecretURL(&d.VMaaSURL, "VMAAS_URL", "vmaas-url", "VMaaS base URL (`http` or `https`, with a host, no query); the listener calls `POST /api/v3/updates`. A password in it is shown as `xxxxx`, in settings and errors alike", checkURL)
	s.ShowDefault("vmaas-url", "(required by `evaluate`)")
	s.Duration(&d.VMaaSTimeout, "VMAAS_TIMEOUT", "vmaas-timeout", 10*time.Second, time.Millisecond, "timeout of one VMaaS call")
	s.Int(&d.VMaaSAttempts, "VMAAS_MAX_ATTEMPTS", "vmaas-max-attempts", 3, 1, "VMaaS (and inventory) attempts inside one handler attempt, on 408, 429, 502, 503, 504, connection errors and timeouts; after them, and at once on any other failure but a refusal of the request, the pipeline retries the record with its own backoff, judging whose failure it was. A refusal (400, a 422 naming the request's input, the inventory's 404 for an unknown host) dead-letters the record at once (docs/configuration.md, \"Retries\")")
	s.Int(&d.VMaaSCacheSize, "VMAAS_CACHE_SIZE", "vmaas-cache-size", 500, 0, "VMaaS answers cached, keyed by the canonical request (`0`: no cache). An answer for a host of 400 packages holds about 115 KB: 500 hold about 57 MB, the old default of 10,000 held 1.1 GB of heap (2.5 GB RSS) within 4 minutes of 60 events/s over 5,000 hosts")
	s.Int(&d.VMaaSCacheMB, "VMAAS_CACHE_MB", "vmaas-cache-mb", 64, 0, "bound of the cached VMaaS answers' memory in MiB, as estimated from their contents; the least recently used leave first (`0`: `VMAAS_CACHE_SIZE` alone bounds it). An answer's size follows its host's packages, so the bound in answers alone leaves the memory to the fleet: 500 answers for hosts of 2,000 packages would hold about 300 MB")
	s.Int(&d.AnswersMB, "ANSWERS_MB", "answers-mb", 64, 0, "MiB the VMaaS and inventory answers being read and decoded at once may hold, as bounded from their size and content (a realistic answer of 93 KB is charged about 0.8 MiB, its worst case 115 times its size): a call waits, first come first served, before reading an answer that does not fit, and one needing more than the whole budget is read alone. "+
		"An answer that turns out to need more than it was charged while the rest is taken fails its attempt as congestion: retried, never counted as the record's failure nor as VMaaS's. "+
		"Kept apart from `LISTENER_INFLIGHT_MB`, which the records hold while they wait for their answers. Each answer is bounded on its own as well: 16 MiB on the wire for VMaaS, 4 MiB for the inventory, 64 MiB decoded (docs/reliability.md, \"Hostile input\"). `0`: no bound on their sum")
	s.SecretURL(&d.InventoryURL, "INVENTORY_URL", "inventory-url", "inventory base URL, for events carrying only the host id; without it such events are dead-lettered. Checked and shown as `VMAAS_URL` is", checkURL)
	s.Duration(&d.InventoryTimeout, "INVENTORY_TIMEOUT", "inventory-timeout", 10*time.Second, time.Millisecond, "timeout of one inventory call")
	s.String(&reporters, "ALLOWED_REPORTERS", "allowed-reporters", "puptoo,rhsm-system-profile-bridge", "comma-separated reporters whose uploads are evaluated; uploads from others are skipped and counted (`reporter not allowed`), not stored, never dead-lettered", nil)
	s.String(&excluded, "EXCLUDED_HOST_TYPES", "excluded-host-types", "edge", "comma-separated host types whose events are skipped and counted (`excluded host type`), not stored, never dead-lettered", nil)
	s.Int(&d.Validation.MaxKeyBytes, "MAX_KEY_BYTES", "max-key-bytes", inventory.DefaultValidationOptions().MaxKeyBytes, 0, "records with a longer key are dead-lettered (`key too large`) without being parsed; inventory keys its events by host id (36 bytes). `0`: no bound")
	s.Int(&d.Validation.MaxHeaders, "MAX_HEADERS", "max-headers", inventory.DefaultValidationOptions().MaxHeaders, 0, "records with more headers are dead-lettered (`headers too large`) without being parsed. `0`: no bound")
	s.Int(&d.Validation.MaxHeaderBytes, "MAX_HEADER_BYTES", "max-header-bytes", inventory.DefaultValidationOptions().MaxHeaderBytes, 0, "records whose header keys and values pass this many bytes together are dead-lettered (`headers too large`) without being parsed. `0`: no bound")
	s.Int(&d.Validation.MaxMessageBytes, "MAX_MESSAGE_BYTES", "max-message-bytes", inventory.DefaultValidationOptions().MaxMessageBytes, 1024, "larger events are dead-lettered (`message too large`) without being parsed (Kafka refuses records over about 1 MB by default)")
	s.Duration(&d.Validation.MaxFutureSkew, "EVENT_MAX_FUTURE_SKEW", "event-max-future-skew", inventory.DefaultValidationOptions().MaxFutureSkew, time.Second, "how far ahead of the listener's clock an upload's time (its `timestamp`, or the record's without one) may be. A later one is dead-lettered (`timestamp in the future`), not applied: applied, it would have every correct upload of its host skipped as `older than applied` until the clock caught up with it. An upload within it is applied, so it is also the longest a fast clock can hold a host back. Keep it above the producers' clock error; deletes are not checked (their time orders nothing)")
	s.String(&cfg.HTTPAddr, "LISTENER_HTTP_ADDR", "http-addr", "127.0.0.1:9000", "address of `/metrics`, `/healthz`, `/readyz`, `/status` and `/status.json` (empty: none)", nil)
	defHTTP := telemetry.DefaultServerLimits()
	s.Duration(&cfg.HTTP.ReadTimeout, "LISTENER_HTTP_READ_TIMEOUT", "http-read-timeout", defHTTP.ReadTimeout, time.Millisecond, "how long reading a request at `LISTENER_HTTP_ADDR` may take, its header and body: a client sending it a byte at a time is cut off then")
	s.Duration(&cfg.HTTP.WriteTimeout, "LISTENER_HTTP_WRITE_TIMEOUT", "http-write-timeout", defHTTP.WriteTimeout, time.Millisecond, "how long writing an answer at `LISTENER_HTTP_ADDR` may take, from the end of its request's header: a client not reading is cut off then. pprof's profile and trace (`LISTENER_PPROF`) get the seconds they are asked for on top")
	s.Duration(&cfg.HTTP.IdleTimeout, "LISTENER_HTTP_IDLE_TIMEOUT", "http-idle-timeout", defHTTP.IdleTimeout, time.Millisecond, "how long a kept-alive connection to `LISTENER_HTTP_ADDR` waits for its next request before it is closed")
	s.Int(&cfg.HTTP.MaxHeaderBytes, "LISTENER_HTTP_MAX_HEADER_BYTES", "http-max-header-bytes", defHTTP.MaxHeaderBytes, 1024, "largest request header `LISTENER_HTTP_ADDR` reads (plus 4 KiB of net/http's slack); a larger one is answered 431")
	s.Int(&cfg.HTTP.MaxConns, "LISTENER_HTTP_MAX_CONNS", "http-max-conns", defHTTP.MaxConns, telemetry.MinServerConns,
		"connections open at once to `LISTENER_HTTP_ADDR`, each a descriptor and some 15-25 KiB. At the cap a new connection takes the place of the one idle longest (waiting for a request, reading one's header, kept alive), never of one whose request is being answered; "+
			"requests other than `/healthz` and `/readyz` are answered by at most three quarters of them at a time, the rest with 503 at once. So a flood of idle connections, or of slow ones, leaves the probes answering and the descriptors bounded")
	s.Secret(&cfg.ReleaseToken, "LISTENER_RELEASE_TOKEN", "release-token", "when set (at least 16 characters), serve `POST /records/release?topic=T&partition=P&offset=O` at `LISTENER_HTTP_ADDR`, guarded by this token as `Authorization: Bearer`: an operator's release of a failing record (one held because nothing can judge its failures) to the dead-letter topic (docs/deploy.md, \"Held records\"). Empty: no such route")
	s.Bool(&cfg.Pprof, "LISTENER_PPROF", "pprof", false, "also serve Go's profiler, `/debug/pprof/`, at `LISTENER_HTTP_ADDR`: CPU and allocation profiles, goroutine dumps; not `/debug/pprof/cmdline`, which would show secrets given as flags (`/status` shows the settings, secrets masked). Off by default: keep it to an address only operators reach")
	s.String(&cfg.TracesExporter, "OTEL_TRACES_EXPORTER", "traces-exporter", "none", "OpenTelemetry traces: `none`; `otlp` (OTLP over HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT`, OpenTelemetry's own variables, `http://localhost:4318` by default); `console` (JSON on stdout). A span per handler attempt under the event's `traceparent`, its VMaaS, inventory and database calls as children, a span per dead letter", oneOf(TracesExporters))
	s.Duration(&cfg.ReadyPinLimit, "LISTENER_READY_PIN_LIMIT", "ready-pin-limit", 5*time.Minute, time.Second, "`/readyz` fails while a partition's oldest unfinished record has held its watermark longer than this, or while a partition has had records waiting and none admitted (nothing in flight, no progress) for this long")
	s.Duration(&cfg.ReadyDBGrace, "LISTENER_READY_DB_GRACE", "ready-db-grace", 10*time.Second, 0, "`/readyz` fails once the database check (every second, on a connection of its own) has failed without a break for this long (`0`: at the first failure), and passes again at the first check that passes, so a blip does not flap readiness")
	s.Duration(&cfg.ReadyVMaaSGrace, "LISTENER_READY_VMAAS_GRACE", "ready-vmaas-grace", 10*time.Second, 0, "`/readyz` fails once the VMaaS check (every second, one updates request for one package) has failed without a break for this long (`0`: at the first failure). The same check tells a record whose VMaaS call fails alone, with nothing else running (its partition waiting behind it), from an outage: its failures count towards its dead letter only while the check passes")
	s.Duration(&cfg.ProgressInterval, "LISTENER_PROGRESS_INTERVAL", "progress-interval", 10*time.Second, 0, "how often progress is logged (`0`: never)")
	s.String(&cfg.LogLevel, "LOG_LEVEL", "log-level", "info", "`debug`, `info`, `warn` or `error`", oneOf([]string{"debug", "info", "warn", "error"}))
	s.Int(&cfg.MemoryLimit, "LISTENER_MEMORY_LIMIT", "memory-limit", 0, 0, "the container's memory limit in bytes, from the pod's `limits.memory` (the manifests pass it through the downward API): the Go runtime's soft limit is set to 90 % of it, so the garbage collector works harder before the kernel kills the pod. `0`: read the cgroup's limit (`/sys/fs/cgroup/memory.max`). Ignored when `GOMEMLIMIT` is set")
	s.String(&cfg.LogFormat, "LOG_FORMAT", "log-format", "auto", "`json`, `text`, or `auto` (text on a terminal, json otherwise). Either way a duration is a string (`\"drain\":\"1.5s\"`), not nanoseconds", oneOf([]string{"auto", "json", "text"}))

	for _, e := range exts {
		if e.Register != nil {
			e.Register(s)
		}
	}
	if err := s.Parse(args, lookup); err != nil {
		return nil, s, err
	}
	cfg.Domain.Effects.DrainTimeout = p.DrainTimeout

	switch strings.TrimSpace(brokers) {
	case "":
		return nil, s, s.Invalid("kafka-brokers", errors.New("no brokers given: set a comma-separated host:port list, or 'embedded'"))
	case EmbeddedBrokers:
		if embedded(exts) == nil {
			return nil, s, s.Invalid("kafka-brokers", errors.New("this build has no embedded broker: run bin/listener-proving (make build) or make demo, or name real brokers"))
		}
		cfg.Embedded = true
	default:
		list, err := kafkaflags.Brokers(brokers)
		if err != nil {
			return nil, s, s.Invalid("kafka-brokers", err)
		}
		cfg.Brokers = list
	}
	if cfg.MaxDecompressedBatchBytes == 0 {
		cfg.MaxDecompressedBatchBytes = max(DecompressedBatchFactor*d.Validation.MaxMessageBytes, MinDefaultDecompressedBatch)
	}
	d.Validation.AllowedReporters = splitList(reporters)
	d.Validation.ExcludedHostTypes = splitList(excluded)
	if cfg.Handler == "evaluate" {
		// Values given were checked as they were read (persistence.CheckURL, checkURL).
		if d.DatabaseURL == "" {
			return nil, s, s.Invalid("database-url", errors.New("required by LISTENER_HANDLER=evaluate"))
		}
		if d.VMaaSURL == "" {
			return nil, s, s.Invalid("vmaas-url", errors.New("required by LISTENER_HANDLER=evaluate"))
		}
	}
	for _, e := range exts {
		if e.Check != nil {
			if err := e.Check(s, &cfg); err != nil {
				return nil, s, err
			}
		}
	}
	if p.BackoffMax < p.BackoffMin {
		return nil, s, s.Invalid("backoff-max", fmt.Errorf("must not be below LISTENER_BACKOFF_MIN (%v)", p.BackoffMin))
	}
	if dlq == "" {
		dlq = kafkaflags.DeadLetterTopic(topic)
	}
	if dlq == topic {
		return nil, s, s.Invalid("kafka-dlq-topic", errors.New("must differ from KAFKA_TOPIC"))
	}
	kv, _ := sarama.ParseKafkaVersion(version)
	if assignor == "cooperative-sticky" && !kv.IsAtLeast(sarama.V2_4_0_0) {
		return nil, s, s.Invalid("kafka-version", errors.New("cooperative-sticky needs at least 2.4.0; raise the version or choose an eager KAFKA_ASSIGNOR"))
	}
	p.InFlightBytes = int64(inFlightMB) << 20
	p.Ordering, _ = ordering.ParseMode(order)
	p.Concurrency, _ = actors.ParseConcurrencyMode(concurrency)
	p.ConcurrencyLaw, _ = limit.ParseLaw(law)
	p.ConsumerGroup = group
	if cfg.Kafka.HeartbeatInterval*3 > cfg.Kafka.SessionTimeout {
		return nil, s, s.Invalid("kafka-heartbeat-interval", fmt.Errorf("must be at most a third of KAFKA_SESSION_TIMEOUT (%v)", cfg.Kafka.SessionTimeout))
	}
	if err := kafkaflags.CheckSecurity(s, *sec); err != nil {
		return nil, s, err
	}
	cfg.Kafka = actors.KafkaSettings{Brokers: cfg.Brokers, Topic: topic, Group: group, DLQTopic: dlq, Version: kv, Assignor: assignor,
		Isolation: isolation, CommitInterval: cfg.Kafka.CommitInterval, SessionTimeout: cfg.Kafka.SessionTimeout, HeartbeatInterval: cfg.Kafka.HeartbeatInterval, Security: *sec}
	if err := p.Validate(); err != nil {
		return nil, s, err
	}
	return &cfg, s, nil
}

// DecompressedBatchFactor times MAX_MESSAGE_BYTES, but at least
// MinDefaultDecompressedBatch, is KAFKA_MAX_DECOMPRESSED_BATCH_BYTES's
// default: a producer's batch of records up to that limit reads
// (librdkafka's default batch is 1 MB, Java's 16 KiB), while a compression
// bomb costs one batch of it (8 MiB at the default, against the 360 MiB of
// four 90 MiB values of zeros, 40 KB on the broker). The floor is the zstd
// window of Kafka's producers at levels 17 to 19 (windowLog 23): sarama
// refuses a zstd frame whose window is larger than the limit, however
// little it holds.
const (
	DecompressedBatchFactor     = 8
	MinDefaultDecompressedBatch = 8 << 20
)

func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// checkURL accepts an http(s) URL with a host. Its error does not quote
// the value, which may carry a password (the setting's error shows it
// redacted).
func checkURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("not an http(s) URL with a host (http://host:port)")
	}
	return nil
}

func nonEmpty(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("must not be empty")
	}
	return nil
}

func oneOf(allowed []string) func(string) error {
	return func(v string) error {
		if !slices.Contains(allowed, v) {
			return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
		}
		return nil
	}
}

func checkVersion(v string) error {
	kv, err := sarama.ParseKafkaVersion(v)
	if err != nil {
		return errors.New("not a Kafka version like 3.6.0")
	}
	if !kv.IsAtLeast(sarama.V0_11_0_0) {
		return errors.New("must be at least 0.11.0 (record headers, idempotent dead-letter writes, read_committed isolation)")
	}
	return nil
}
