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
	"github.com/patchflow/patchflow/cmd/internal/kafkaflags"
	"github.com/patchflow/patchflow/cmd/internal/settings"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
)

// EmbeddedBrokers is the KAFKA_BROKERS value that starts an in-process broker.
const EmbeddedBrokers = "embedded"

// Config is the listener's configuration.
type Config struct {
	Brokers   []string // empty when Embedded
	Embedded  bool
	Kafka     actors.KafkaSettings
	Consumers int
	Pipeline  actors.Settings

	// Handler is "evaluate" (the domain handler: PostgreSQL and VMaaS) or
	// "simulated" (waits SimulatedLatency; for measuring the pipeline alone).
	Handler string
	Domain  DomainConfig

	HTTPAddr      string
	ReadyPinLimit time.Duration
	// ReadyDBGrace is how long the database check must fail without a
	// break before the process reports not ready.
	ReadyDBGrace time.Duration

	EmbeddedPartitions int
	SimulatedLatency   time.Duration
	SimulatedJitter    time.Duration
	// SimulatedCapacity is how many records the simulated handler serves
	// at once; the others queue (0: any number).
	SimulatedCapacity int
	// SimulatedRecordLog and SimulatedPinOffset are measurement knobs of
	// the simulated handler (see SimulatedHandler): a file that gets a line
	// per completed record (empty: none), and the offset whose record waits
	// in every partition until its context ends (-1: none).
	SimulatedRecordLog string
	SimulatedPinOffset int
	ProgressInterval   time.Duration
	LogLevel           string
	LogFormat          string
}

// Parse reads the configuration from lookup (the environment) and args (the
// flags, which win). It returns settings.ErrHelp for -h, or an error naming
// the bad setting.
func Parse(args []string, lookup func(string) (string, bool)) (*Config, *settings.Set, error) {
	var (
		brokers, topic, group, dlq, version, assignor, order, isolation, concurrency, law string
		cfg                                                                               Config
	)
	def := actors.DefaultSettings()
	p := &cfg.Pipeline
	s := settings.New("listener")
	s.String(&brokers, "KAFKA_BROKERS", "kafka-brokers", "", "comma-separated host:port list of Kafka brokers, or 'embedded' for an in-process broker (required)", nil)
	s.String(&topic, "KAFKA_TOPIC", "kafka-topic", kafkaflags.DefaultTopic, "topic of inventory events", nonEmpty)
	s.String(&group, "KAFKA_GROUP", "kafka-group", "patchflow-listener", "consumer group id", nonEmpty)
	s.String(&dlq, "KAFKA_DLQ_TOPIC", "kafka-dlq-topic", "", "dead-letter topic (default: the topic name + '.dlq')", nil)
	s.String(&version, "KAFKA_VERSION", "kafka-version", "3.6.0", "Kafka protocol version to speak (at least 2.4.0 for cooperative rebalancing)", checkVersion)
	s.String(&assignor, "KAFKA_ASSIGNOR", "kafka-assignor", "cooperative-sticky", "partition assignment: "+strings.Join(actors.Assignors, ", ")+"; only cooperative-sticky keeps unmoved partitions running through a rebalance", oneOf(actors.Assignors))
	s.String(&isolation, "KAFKA_ISOLATION_LEVEL", "kafka-isolation-level", actors.IsolationLevels[0], "how transactional topics are read: read_committed (records of aborted transactions are never processed; needs KAFKA_VERSION 0.11.0 or later) or read_uncommitted (every record, aborted or not)", oneOf(actors.IsolationLevels))
	s.Duration(&cfg.Kafka.CommitInterval, "KAFKA_COMMIT_INTERVAL", "kafka-commit-interval", actors.DefaultCommitInterval, time.Millisecond, "how often marked offsets and their metadata are committed (only when one changed); a crash replays what finished since the last commit besides what was in flight")
	s.Duration(&cfg.Kafka.SessionTimeout, "KAFKA_SESSION_TIMEOUT", "kafka-session-timeout", 10*time.Second, time.Second, "how long the group waits for a silent member (a crashed process) before moving its partitions")
	s.Duration(&cfg.Kafka.HeartbeatInterval, "KAFKA_HEARTBEAT_INTERVAL", "kafka-heartbeat-interval", 3*time.Second, 100*time.Millisecond, "heartbeat interval; keep it under a third of the session timeout")
	sec := &cfg.Kafka.Security
	kafkaflags.Security(s, sec)
	s.Int(&cfg.Consumers, "LISTENER_CONSUMERS", "consumers", 1, 1, "consumer-group members (M) in this process")
	s.Int(&p.InFlightPerPartition, "LISTENER_INFLIGHT_PER_PARTITION", "inflight-per-partition", def.InFlightPerPartition, 1, "records in flight per partition (S)")
	s.Int(&p.InFlightTotal, "LISTENER_INFLIGHT_TOTAL", "inflight-total", def.InFlightTotal, 1, "records in flight in the whole process (G): the limit with LISTENER_CONCURRENCY=fixed, the ceiling with adaptive")
	s.String(&concurrency, "LISTENER_CONCURRENCY", "concurrency", def.Concurrency.String(), "how the process-wide in-flight limit is set: adaptive (moves between LISTENER_CONCURRENCY_FLOOR and G from handler latency against its no-load baseline, and from transient failures) or fixed (G)", oneOf([]string{"adaptive", "fixed"}))
	s.Int(&p.ConcurrencyFloor, "LISTENER_CONCURRENCY_FLOOR", "concurrency-floor", def.ConcurrencyFloor, 1, "the adaptive limit's floor (at most G)")
	s.String(&law, "LISTENER_CONCURRENCY_LAW", "concurrency-law", def.ConcurrencyLaw.String(), "the adaptive limit's control law: gradient, vegas or aimd (docs/architecture.md, \"Adaptive concurrency\")", oneOf([]string{"gradient", "vegas", "aimd"}))
	s.Int(&p.SpanPerPartition, "LISTENER_SPAN_PER_PARTITION", "span-per-partition", 0, 0, fmt.Sprintf("offsets a partition may admit past its oldest unfinished record (0: %d × LISTENER_INFLIGHT_PER_PARTITION); a record that pins the watermark stops admission there (span-blocked on /status and /metrics)", actors.DefaultSpanFactor))
	s.Int(&p.CommitMetadataMaxBytes, "LISTENER_COMMIT_METADATA_MAX_BYTES", "commit-metadata-max-bytes", def.CommitMetadataMaxBytes, 0, "largest commit metadata (the offsets finished above the committed one, so a crash or handover replays only what was unfinished); keep it at or below the brokers' offset.metadata.max.bytes (0: none)")
	s.String(&order, "LISTENER_ORDERING", "ordering", def.Ordering.String(), "ordering within a partition: key (one record per key at a time, in order), partition (one record at a time) or unordered", oneOf([]string{"key", "partition", "unordered"}))
	s.Duration(&p.DrainTimeout, "LISTENER_DRAIN_TIMEOUT", "drain-timeout", def.DrainTimeout, 100*time.Millisecond, "how long a partition waits for in-flight records when its claim ends before cancelling them")
	s.Int(&p.MaxAttempts, "LISTENER_MAX_ATTEMPTS", "max-attempts", def.MaxAttempts, 1, "a record's own failures before it is dead-lettered: unclassified failures, panics, and transient failures while the same dependency serves other records (a shared outage does not count and is retried until it passes)")
	s.Duration(&p.AttemptTimeout, "LISTENER_ATTEMPT_TIMEOUT", "attempt-timeout", def.AttemptTimeout, 0, "deadline of one handler attempt (0: none); keep it well above normal handler times, database queueing included")
	s.Duration(&p.BackoffMin, "LISTENER_BACKOFF_MIN", "backoff-min", def.BackoffMin, time.Millisecond, "first retry backoff (doubles per attempt, with jitter)")
	s.Duration(&p.BackoffMax, "LISTENER_BACKOFF_MAX", "backoff-max", def.BackoffMax, time.Millisecond, "longest retry backoff")
	s.String(&cfg.Handler, "LISTENER_HANDLER", "handler", "evaluate", "evaluate (store and evaluate events: needs DATABASE_URL and VMAAS_URL) or simulated (only waits; measures the pipeline alone)", oneOf([]string{"evaluate", "simulated"}))
	var reporters, excluded string
	d := &cfg.Domain
	s.SecretURL(&d.DatabaseURL, "DATABASE_URL", "database-url", "PostgreSQL connection URL (TLS via sslmode, sslrootcert...); its password is never logged")
	s.Int(&d.Pool.MaxOpen, "DB_MAX_OPEN_CONNS", "db-max-open-conns", 32, 1, "database connections open at most")
	s.Int(&d.Pool.MaxIdle, "DB_MAX_IDLE_CONNS", "db-max-idle-conns", 32, 0, "database connections kept idle")
	s.Duration(&d.Pool.MaxLifetime, "DB_CONN_MAX_LIFETIME", "db-conn-max-lifetime", 30*time.Minute, 0, "recycle database connections after this long (0: never)")
	s.Int(&d.Pool.IDCacheSize, "DB_ID_CACHE_SIZE", "db-id-cache-size", persistence.DefaultIDCacheSize, 1,
		"ids of packages and advisories (each) kept in memory, so events whose packages were seen before look none up (about 150 bytes each)")
	s.Duration(&d.Pool.DeletedTTL, "DELETED_SYSTEM_TTL", "deleted-system-ttl", 24*time.Hour, time.Minute, "how long a deleted host is remembered so late events for it are ignored")
	s.String(&d.VMaaSURL, "VMAAS_URL", "vmaas-url", "", "VMaaS base URL (POST /api/v3/updates)", nil)
	s.Duration(&d.VMaaSTimeout, "VMAAS_TIMEOUT", "vmaas-timeout", 10*time.Second, time.Millisecond, "timeout of one VMaaS call")
	s.Int(&d.VMaaSAttempts, "VMAAS_MAX_ATTEMPTS", "vmaas-max-attempts", 3, 1, "VMaaS attempts per evaluation before the record is retried by the pipeline")
	s.Int(&d.VMaaSCacheSize, "VMAAS_CACHE_SIZE", "vmaas-cache-size", 10000, 0, "VMaaS answers cached by request (0: no cache)")
	s.String(&d.InventoryURL, "INVENTORY_URL", "inventory-url", "", "inventory base URL, for events that carry only the host id (optional)", nil)
	s.Duration(&d.InventoryTimeout, "INVENTORY_TIMEOUT", "inventory-timeout", 10*time.Second, time.Millisecond, "timeout of one inventory call")
	s.String(&reporters, "ALLOWED_REPORTERS", "allowed-reporters", "puptoo,rhsm-system-profile-bridge", "comma-separated reporters whose uploads are evaluated; others are skipped and counted (reason \"reporter not allowed\"), not dead-lettered", nil)
	s.String(&excluded, "EXCLUDED_HOST_TYPES", "excluded-host-types", "edge", "comma-separated host types that are not stored or evaluated; their events are skipped and counted (reason \"excluded host type\"), not dead-lettered", nil)
	s.Int(&d.Validation.MaxMessageBytes, "MAX_MESSAGE_BYTES", "max-message-bytes", messages.DefaultValidationOptions().MaxMessageBytes, 1024, "larger events are dead-lettered as too large (Kafka refuses records over about 1 MB by default)")
	s.Duration(&cfg.SimulatedLatency, "LISTENER_SIMULATED_LATENCY", "simulated-latency", 10*time.Millisecond, 0, "latency of the built-in simulated handler")
	s.Duration(&cfg.SimulatedJitter, "LISTENER_SIMULATED_JITTER", "simulated-jitter", 0, 0, "uniform random extra latency of the simulated handler, up to this much")
	s.Int(&cfg.SimulatedCapacity, "LISTENER_SIMULATED_CAPACITY", "simulated-capacity", 0, 0, "records the simulated handler serves at once, each for its latency; the others queue first come first served, the wait counting in their handler time, as in front of a downstream with this many workers (0: any number)")
	s.String(&cfg.SimulatedRecordLog, "LISTENER_SIMULATED_RECORD_LOG", "simulated-record-log", "", "measurement only (benchmarks): the simulated handler appends a line \"partition offset\" to this file for every record it completes, unbuffered, so a SIGKILL loses none written (empty: none)", nil)
	s.Int(&cfg.SimulatedPinOffset, "LISTENER_SIMULATED_PIN_OFFSET", "simulated-pin-offset", -1, -1, "measurement only (benchmarks): the simulated handler holds the record at this offset in every partition until its context ends (a drain cancels it, or LISTENER_ATTEMPT_TIMEOUT passes), pinning the watermark (-1: none)")
	s.String(&cfg.HTTPAddr, "LISTENER_HTTP_ADDR", "http-addr", "127.0.0.1:9000", "address of /metrics, /healthz and /readyz (empty: none)", nil)
	s.Duration(&cfg.ReadyPinLimit, "LISTENER_READY_PIN_LIMIT", "ready-pin-limit", 5*time.Minute, time.Second, "not ready when a partition's oldest unfinished record has held its watermark longer than this, or a partition has had records waiting and none admitted for this long")
	s.Duration(&cfg.ReadyDBGrace, "LISTENER_READY_DB_GRACE", "ready-db-grace", 10*time.Second, 0, "not ready once the database check (every second, on a connection of its own) has failed without a break for this long; ready again at the first check that passes")
	s.Int(&cfg.EmbeddedPartitions, "EMBEDDED_PARTITIONS", "embedded-partitions", 8, 1, "partitions of the topic on the embedded broker")
	s.Duration(&cfg.ProgressInterval, "LISTENER_PROGRESS_INTERVAL", "progress-interval", 10*time.Second, 0, "how often to log progress (0: never)")
	s.String(&cfg.LogLevel, "LOG_LEVEL", "log-level", "info", "debug, info, warn or error", oneOf([]string{"debug", "info", "warn", "error"}))
	s.String(&cfg.LogFormat, "LOG_FORMAT", "log-format", "auto", "json, text, or auto (text on a terminal, json otherwise)", oneOf([]string{"auto", "json", "text"}))

	if err := s.Parse(args, lookup); err != nil {
		return nil, s, err
	}

	switch strings.TrimSpace(brokers) {
	case "":
		return nil, s, s.Invalid("kafka-brokers", errors.New("no brokers given: set a comma-separated host:port list, or 'embedded'"))
	case EmbeddedBrokers:
		cfg.Embedded = true
	default:
		list, err := kafkaflags.Brokers(brokers)
		if err != nil {
			return nil, s, s.Invalid("kafka-brokers", err)
		}
		cfg.Brokers = list
	}
	d.Validation.AllowedReporters = splitList(reporters)
	d.Validation.ExcludedHostTypes = splitList(excluded)
	if cfg.Handler == "evaluate" {
		if d.DatabaseURL == "" {
			return nil, s, s.Invalid("database-url", errors.New("required by LISTENER_HANDLER=evaluate (or run LISTENER_HANDLER=simulated)"))
		}
		if err := checkURL(d.VMaaSURL); err != nil {
			return nil, s, s.Invalid("vmaas-url", fmt.Errorf("required by LISTENER_HANDLER=evaluate: %w", err))
		}
		if d.InventoryURL != "" {
			if err := checkURL(d.InventoryURL); err != nil {
				return nil, s, s.Invalid("inventory-url", err)
			}
		}
	}
	if cfg.Handler != "simulated" {
		if cfg.SimulatedRecordLog != "" {
			return nil, s, s.Invalid("simulated-record-log", errors.New("only for LISTENER_HANDLER=simulated"))
		}
		if cfg.SimulatedPinOffset >= 0 {
			return nil, s, s.Invalid("simulated-pin-offset", errors.New("only for LISTENER_HANDLER=simulated"))
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

func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func checkURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", v)
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
