package consumer

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/limit"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/internal/telemetry"
)

// Config is what a Consumer needs. Brokers, Topic (or Topics) and Group
// are required; every other field has a default when left at its zero value
// (listed with the field), so a Config of three fields is a production
// setting. New refuses a Config it cannot run with an error naming the
// field.
//
// Offsets are always committed by the consumer, only past finished records,
// every CommitInterval and at the end of each claim; there is no setting to
// turn that off. A dead-letter topic always exists: the consumer creates it
// at start when it is missing.
type Config struct {
	// Brokers are the bootstrap brokers, host:port each.
	Brokers []string
	// Topic is the topic consumed, a shorthand for Topics of one; Topics
	// are the topics consumed (Topic, also set, is consumed with them). At
	// least one, each named once. Key order, the committed offset and its
	// metadata are per partition of each topic.
	Topic  string
	Topics []string
	// Group is the consumer group id. It is also written into dead-letter
	// envelopes.
	Group string
	// DeadLetterTopic receives the records of every topic that cannot be
	// handled. Default: one per topic, its name + ".dlq". Each is created at
	// start when missing, with its source topic's partition count and room
	// for its largest record (when shared: the most partitions and the
	// largest record of its sources). It is none of the topics consumed,
	// nor collides with one ('.' and '_' are one to Kafka).
	DeadLetterTopic string
	// KafkaVersion is the protocol version to speak. Default "3.6.0";
	// at least "0.11.0" (headers, idempotent writes, read_committed), at
	// least "2.4.0" for the cooperative-sticky assignor.
	KafkaVersion string
	// Assignor is the partition assignment: AssignorCooperativeSticky
	// (default: partitions that stay with a member keep running through a
	// rebalance), or an eager one (AssignorSticky, AssignorRange,
	// AssignorRoundRobin: every rebalance drains every partition).
	Assignor Assignor
	// Isolation is how transactional topics are read:
	// IsolationReadCommitted (default) or IsolationReadUncommitted. Under
	// read_uncommitted, sarama starts a claim from an unstable read of the
	// committed offset, which a coordinator that has just taken the group
	// over can answer from before its predecessor's last commits: such a
	// claim runs those records again.
	Isolation Isolation
	// CommitInterval is how often marked offsets are committed, when one
	// changed. Default 100 ms: a crash replays what finished since the last
	// commit besides what was in flight.
	CommitInterval time.Duration
	// CommitMode is CommitPeriodic (default) or CommitTransactional: the
	// results and the offsets of each claim in one Kafka transaction every
	// CommitInterval (needs KafkaVersion 0.11.0 or later and brokers that
	// allow transactions; results reach read_committed readers only as
	// they commit).
	CommitMode CommitMode
	// TransactionalID prefixes the transactional id of each claim's
	// producer under CommitTransactional: TransactionalID-topic-partition.
	// Default: Group. Processes of one group must share it; no other
	// producer may use ids of its form.
	TransactionalID string
	// SessionTimeout (default 10 s) and HeartbeatInterval (default 3 s or a
	// third of SessionTimeout, whichever is less; at most a third of it)
	// tune how fast the group notices a dead member.
	SessionTimeout, HeartbeatInterval time.Duration
	// Security is TLS and SASL; the zero value is plaintext.
	Security Security
	// Members is how many consumer-group members the process runs; they
	// share InFlightTotal. Default 1, at most 64.
	Members int
	// ClientID names the process to the brokers (their request logs and
	// quotas): the admin client and the dead-letter producers take it as
	// it is, the members ClientID-0, ClientID-1, …, the probe client
	// ClientID-probe, the lag reader ClientID-lag. Default "patchflow".
	ClientID string
	// Rack is the rack (or zone) this process runs in, for brokers that
	// serve fetches from the nearest replica (KIP-392: their
	// replica.selector.class set to RackAwareReplicaSelector and
	// broker.rack set); it needs KafkaVersion 2.4.0 or later. Default:
	// none, every fetch from the leader.
	Rack string

	// InFlightPerPartition (S, default 64, or InFlightTotal if less) bounds
	// the records admitted and not finished per partition; InFlightTotal
	// (G, default 1,024) per process: the limit with ConcurrencyFixed, the
	// adaptive limit's ceiling otherwise. S must not exceed G, and G must
	// not exceed
	// MaxInFlight (16,384): each record in flight costs about 30 KiB
	// besides its bytes (its actor, its goroutine, its ledger slot), so
	// the ceiling is about 500 MiB of that alone.
	InFlightPerPartition, InFlightTotal int
	// InFlightBytes (default 128 MiB; negative: no byte bound) bounds the
	// memory of the records in flight in the process, as the Handler
	// counts it (RecordSizer; the records' wire size otherwise): admission
	// waits, first come first served, while the next record does not fit.
	// A record larger than the whole budget runs alone. A record waiting
	// for a verdict on its failure lends its bytes to the records admitted
	// meanwhile (its evidence): the records running then weigh at most
	// twice the budget.
	InFlightBytes int64
	// Concurrency is ConcurrencyAdaptive (default: the process-wide limit
	// moves between ConcurrencyFloor and InFlightTotal following the
	// handler's latency) or ConcurrencyFixed (it stays at InFlightTotal).
	Concurrency Concurrency
	// ConcurrencyFloor (default 8, or InFlightTotal if less; at most
	// InFlightTotal), ConcurrencyLaw (LawGradient, default; LawVegas,
	// LawAIMD) and ConcurrencyTolerance (default 1; at least 1 and at most
	// 4: how many times its no-load latency the handler may take before
	// the limit counts a queue) tune the adaptive limit.
	ConcurrencyFloor     int
	ConcurrencyLaw       ConcurrencyLaw
	ConcurrencyTolerance float64
	// Ordering within a partition: OrderingKey (default: one record per
	// key at a time, in offset order), OrderingPartition (one record at a
	// time) or OrderingUnordered.
	Ordering Ordering
	// DrainTimeout bounds how long in-flight records may finish at the end
	// of a claim or at shutdown. Default 20 s.
	DrainTimeout time.Duration
	// MaxAttempts (default 5) is how many of a record's own failures it
	// may have before it is dead-lettered; a shared outage does not count.
	MaxAttempts int
	// AttemptTimeout is one handler call's deadline. Default 2 min;
	// negative: none (then a record failing on its own has no time bound).
	AttemptTimeout time.Duration
	// BackoffMin (default 100 ms, or BackoffMax if less) and BackoffMax
	// (default 10 s, or BackoffMin if more) bound the exponential backoff
	// between attempts.
	BackoffMin, BackoffMax time.Duration
	// EvidenceWindow (default 1.5 s) is how long after a record's failure
	// other records' calls to the same dependency, and its health checks
	// (WithHealthCheck), count as evidence of whose failure it was: the
	// record's own (others served) or shared (others failing too). Keep it
	// above the health checks' 1 s interval.
	EvidenceWindow time.Duration
	// SpanPerPartition bounds the offsets a partition admits past its
	// oldest unfinished record. Default 64 × InFlightPerPartition.
	SpanPerPartition int
	// CommitMetadataMaxBytes bounds the commit metadata that records the
	// offsets finished above the committed one, so a new owner runs only
	// what was unfinished. Default 4,096, lowered at start to the brokers'
	// offset.metadata.max.bytes; negative: none.
	CommitMetadataMaxBytes int
	// ReadyPinLimit: Ready reports false while a partition's oldest
	// unfinished record has held its committed offset longer than this, or
	// a partition with records waiting has admitted none that long.
	// Default 5 min. Durations other than AttemptTimeout and
	// ProgressInterval must not be negative.
	ReadyPinLimit time.Duration
	// ProgressInterval is how often a progress line is logged. Default
	// 10 s; negative: never.
	ProgressInterval time.Duration

	// MaxDecompressedBatchBytes bounds what one record batch may
	// decompress to as it is fetched: a compression bomb (a few KB on the
	// broker, hundreds of MB decompressed) fails its decoding at this
	// many bytes instead of filling memory. No fetch can read such a
	// batch: each of its offsets is dead-lettered by itself (reason
	// "batch over the decompression limit", without key or value) and
	// the partition goes on past them. Keep it above the largest batch
	// the producers write, uncompressed (their batch size, or their
	// largest record when larger), and at or above their zstd window
	// (8 MiB for Kafka's producers at zstd levels 17 to 19): sarama
	// refuses a zstd frame whose window is larger, however little it
	// holds. Default 8 MiB; negative: unbounded.
	// It is sarama.MaxDecompressedBatchSize, which is process-wide: every
	// sarama client of the process decodes with the value of the Consumer
	// that started last. It bounds one batch, not a fetch: a fetch of many
	// small batches, each under it, is decoded whole (docs/consumer.md,
	// "Compression bomb").
	MaxDecompressedBatchBytes int

	// BatchSize (default DefaultBatchSize, 64; at most InFlightTotal; 1:
	// no batches) and BatchLinger (default DefaultBatchLinger, 5 ms; at
	// most MaxBatchLinger, 1 s) shape the batches of a BatchHandler: up to
	// BatchSize records ready at once, gathered for at most BatchLinger
	// after the first. A Handler that is not a BatchHandler ignores them.
	BatchSize   int
	BatchLinger time.Duration

	// HTTP bounds WithHTTP's server; each field left zero has its default.
	HTTP HTTPLimits
}

// HTTPLimits bound WithHTTP's server, so that no client holds a connection
// for long (one that connects and never asks, sends its request a byte at
// a time, never reads its answer, or keeps its connection alive unused)
// and no number of clients starves the probes. Durations must not be
// negative.
type HTTPLimits struct {
	// ReadTimeout (default 10 s) bounds reading a request, its header and
	// its body.
	ReadTimeout time.Duration
	// WriteTimeout (default 30 s) bounds writing an answer, counted from
	// the end of its request's header; pprof's profile and trace
	// (WithPprof) get the seconds they are asked for on top.
	WriteTimeout time.Duration
	// IdleTimeout (default 1 min) is how long a kept-alive connection
	// waits for its next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes (default 16 KiB, at least 1 KiB) bounds a request's
	// header: a larger one is answered 431.
	MaxHeaderBytes int
	// MaxConns (default 64, at least 4) bounds the connections open at
	// once. At the cap a new connection takes the place of the one idle
	// longest (waiting for a request, reading one's header, kept alive);
	// one whose request is being answered is never closed for it. Requests
	// other than /healthz and /readyz are answered by at most MaxConns −
	// MaxConns/4 at a time, the rest with 503 at once, so a probe always
	// finds a connection to take the place of.
	MaxConns int
}

// Ceilings New holds the Config to.
const (
	// MaxInFlight is the most InFlightTotal may be.
	MaxInFlight = 16_384
	// MaxMembers is the most Members may be.
	MaxMembers = 64
	// MaxConcurrencyTolerance is the most ConcurrencyTolerance may be.
	MaxConcurrencyTolerance = limit.MaxTolerance
)

// validClientID is what a client id (and a topic's name) may hold
// (Kafka's own rule).
var validClientID = regexp.MustCompile(`\A[A-Za-z0-9._-]+\z`)

// defaultMaxDecompressedBatchBytes is Config.MaxDecompressedBatchBytes's
// default: eight times Kafka's default record limit (about 1 MB), so a
// producer's batch of records up to that limit reads (librdkafka's default
// batch is 1 MB; Java's 16 KiB), as does a record of several MB that the
// source topic holds only compressed, while a bomb costs one batch of it.
const defaultMaxDecompressedBatchBytes = 8 << 20

// Security is how the consumer reaches the brokers: TLS, SASL, or both.
// The password is never shown: String masks it.
type Security struct {
	TLS                bool
	CAFile             string // PEM; empty: the system roots
	CertFile, KeyFile  string // PEM client certificate for mutual TLS; both or neither
	InsecureSkipVerify bool
	SASLMechanism      SASLMechanism // SASLNone (default), SASLPlain, SASLScramSHA256 or SASLScramSHA512
	SASLUser           string
	SASLPassword       string `json:"-"`
}

// String shows the settings with the SASL password masked.
func (s Security) String() string { return s.kafka().String() }

// GoString is String, for %#v.
func (s Security) GoString() string { return s.String() }

// LogValue is String, for log/slog.
func (s Security) LogValue() slog.Value { return slog.StringValue(s.String()) }

func (s Security) kafka() actors.KafkaSecurity {
	return actors.KafkaSecurity{TLS: s.TLS, CAFile: s.CAFile, CertFile: s.CertFile, KeyFile: s.KeyFile,
		InsecureSkipVerify: s.InsecureSkipVerify, SASLMechanism: string(s.SASLMechanism), SASLUser: s.SASLUser, SASLPassword: s.SASLPassword}
}

// resolved is a Config with its defaults applied, in the pipeline's terms.
type resolved struct {
	kafka            actors.KafkaSettings
	pipeline         actors.Settings
	members          int
	readyPinLimit    time.Duration
	progressInterval time.Duration
	http             telemetry.ServerLimits
	// maxBatchBytes is MaxDecompressedBatchBytes resolved: 0 for unbounded.
	maxBatchBytes int
	// transactional: CommitMode is CommitTransactional; transactionalID
	// is TransactionalID resolved.
	transactional   bool
	transactionalID string
	// batchSize and batchLinger shape a BatchHandler's batches.
	batchSize   int
	batchLinger time.Duration
}

// resolve applies the defaults and checks cfg, naming every bad field.
func (cfg Config) resolve() (resolved, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("consumer.Config.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	r := resolved{pipeline: actors.DefaultSettings(), members: 1, readyPinLimit: 5 * time.Minute, progressInterval: 10 * time.Second}
	if len(cfg.Brokers) == 0 {
		bad("Brokers", "required: the bootstrap brokers, host:port each")
	}
	for _, b := range cfg.Brokers {
		if strings.Contains(b, "@") || strings.Contains(b, "://") || !strings.Contains(b, ":") {
			bad("Brokers", "each is host:port, without a scheme or credentials (Security.SASLUser logs in)")
			break
		}
	}
	topics := cfg.topics()
	if len(topics) == 0 {
		bad("Topic", "required: Topic or Topics names at least one topic")
	}
	for i, t := range topics {
		switch {
		case strings.TrimSpace(t) == "":
			bad("Topics", "a topic name is empty")
		case slices.Contains(topics[:i], t):
			bad("Topics", "%q is named twice", t)
		}
	}
	if strings.TrimSpace(cfg.Group) == "" {
		bad("Group", "required")
	}
	dlqOf := map[string]string{}
	for _, t := range topics {
		dlqOf[t] = orDefault(cfg.DeadLetterTopic, t+".dlq")
	}
	for _, t := range topics {
		if err := legalTopic(t); err != nil {
			bad("Topics", "%q: %v", t, err)
		}
		d := dlqOf[t]
		if err := legalTopic(d); err != nil {
			bad("DeadLetterTopic", "%q, the dead-letter topic of %q: %v", d, t, err)
		}
		for _, other := range topics {
			if collides(d, other) {
				bad("DeadLetterTopic", "%q, the dead-letter topic of %q, is (or collides with, '.' and '_' being one to Kafka) the topic consumed %q", d, t, other)
			}
		}
	}
	first := ""
	if len(topics) > 0 {
		first = topics[0]
	}
	dlq := dlqOf[first]
	version, err := sarama.ParseKafkaVersion(kafkaVersion(orDefault(cfg.KafkaVersion, "3.6.0")))
	switch {
	case err != nil:
		bad("KafkaVersion", "%q is not a Kafka version like 3.6.0", cfg.KafkaVersion)
	case !version.IsAtLeast(sarama.V0_11_0_0):
		bad("KafkaVersion", "must be at least 0.11.0 (record headers, idempotent dead-letter writes, read_committed), got %s", cfg.KafkaVersion)
	}
	assignor := string(orDefault(cfg.Assignor, AssignorCooperativeSticky))
	if !slices.Contains(actors.Assignors, assignor) {
		bad("Assignor", "%q: want one of %s", assignor, strings.Join(actors.Assignors, ", "))
	} else if Assignor(assignor) == AssignorCooperativeSticky && err == nil && !version.IsAtLeast(sarama.V2_4_0_0) {
		bad("Assignor", "cooperative-sticky needs KafkaVersion 2.4.0 or later; raise it or choose an eager assignor")
	}
	isolation := string(orDefault(cfg.Isolation, IsolationReadCommitted))
	if !slices.Contains(actors.IsolationLevels, isolation) {
		bad("Isolation", "%q: want one of %s", isolation, strings.Join(actors.IsolationLevels, ", "))
	}
	if cfg.Rack != "" && err == nil && !version.IsAtLeast(sarama.V2_4_0_0) {
		bad("Rack", "fetching from the nearest replica needs KafkaVersion 2.4.0 or later")
	}
	switch cfg.CommitMode {
	case "", CommitPeriodic:
	case CommitTransactional:
		r.transactional = true
	default:
		bad("CommitMode", "%q: want periodic or transactional", cfg.CommitMode)
	}
	r.transactionalID = orDefault(cfg.TransactionalID, cfg.Group)
	if cfg.TransactionalID != "" && (strings.TrimSpace(cfg.TransactionalID) != cfg.TransactionalID || len(cfg.TransactionalID) > 200) {
		bad("TransactionalID", "%q: want no leading or trailing space and at most 200 bytes", cfg.TransactionalID)
	}
	clientID := orDefault(cfg.ClientID, "patchflow")
	if !validClientID.MatchString(clientID) || len(clientID) > 255 {
		bad("ClientID", "%q: want 1 to 255 of A-Z, a-z, 0-9, '.', '_' and '-'", clientID)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"CommitInterval", cfg.CommitInterval}, {"SessionTimeout", cfg.SessionTimeout}, {"HeartbeatInterval", cfg.HeartbeatInterval},
		{"DrainTimeout", cfg.DrainTimeout}, {"BackoffMin", cfg.BackoffMin}, {"BackoffMax", cfg.BackoffMax}, {"EvidenceWindow", cfg.EvidenceWindow},
		{"ReadyPinLimit", cfg.ReadyPinLimit}, {"HTTP.ReadTimeout", cfg.HTTP.ReadTimeout}, {"HTTP.WriteTimeout", cfg.HTTP.WriteTimeout},
		{"HTTP.IdleTimeout", cfg.HTTP.IdleTimeout}} {
		if f.d < 0 {
			bad(f.name, "must not be negative, got %v (zero is the default)", f.d)
		}
	}
	if cfg.Members < 0 || cfg.Members > MaxMembers {
		bad("Members", "must be 1 to %d, got %d (zero is the default, 1)", MaxMembers, cfg.Members)
	}
	// The heartbeat's default follows a shorter session (a third of it).
	session := orDefault(cfg.SessionTimeout, 10*time.Second)
	heartbeat := orDefault(cfg.HeartbeatInterval, min(3*time.Second, session/3))
	if heartbeat*3 > session {
		bad("HeartbeatInterval", "%v must be at most a third of SessionTimeout (%v)", heartbeat, session)
	}
	if m := cfg.Security.SASLMechanism; !slices.Contains([]SASLMechanism{SASLNone, SASLPlain, SASLScramSHA256, SASLScramSHA512}, m) {
		bad("Security.SASLMechanism", "%q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (or none)", m)
	}
	if cfg.Security.SASLMechanism != "" && cfg.Security.SASLUser == "" {
		bad("Security.SASLUser", "required with SASLMechanism %s", cfg.Security.SASLMechanism)
	}
	if (cfg.Security.CertFile == "") != (cfg.Security.KeyFile == "") {
		bad("Security.KeyFile", "a client certificate needs both CertFile and KeyFile")
	}
	if n := cfg.HTTP.MaxConns; n != 0 && n < telemetry.MinServerConns {
		bad("HTTP.MaxConns", "must be at least %d, got %d (zero is the default, %d)", telemetry.MinServerConns, n, telemetry.DefaultServerLimits().MaxConns)
	}
	if n := cfg.HTTP.MaxHeaderBytes; n != 0 && n < 1024 {
		bad("HTTP.MaxHeaderBytes", "must be at least 1024, got %d (zero is the default, %d)", n, telemetry.DefaultServerLimits().MaxHeaderBytes)
	}
	defHTTP := telemetry.DefaultServerLimits()
	r.http = telemetry.ServerLimits{ReadTimeout: orDefault(cfg.HTTP.ReadTimeout, defHTTP.ReadTimeout),
		WriteTimeout: orDefault(cfg.HTTP.WriteTimeout, defHTTP.WriteTimeout), IdleTimeout: orDefault(cfg.HTTP.IdleTimeout, defHTTP.IdleTimeout),
		MaxHeaderBytes: orDefault(cfg.HTTP.MaxHeaderBytes, defHTTP.MaxHeaderBytes), MaxConns: orDefault(cfg.HTTP.MaxConns, defHTTP.MaxConns)}
	r.members = orDefault(cfg.Members, 1)
	r.kafka = actors.KafkaSettings{Brokers: cfg.Brokers, Topic: first, Topics: topics, DeadLetterTopics: dlqOf, Group: cfg.Group, DLQTopic: dlq, Version: version,
		Assignor: assignor, Isolation: isolation, ClientID: clientID, Rack: cfg.Rack, CommitInterval: orDefault(cfg.CommitInterval, actors.DefaultCommitInterval),
		SessionTimeout: session, HeartbeatInterval: heartbeat, Security: cfg.Security.kafka()}

	p := &r.pipeline
	p.ConsumerGroup = cfg.Group
	p.InFlightTotal = orDefault(cfg.InFlightTotal, p.InFlightTotal)
	// A default follows a smaller total given; only values given are
	// held against each other.
	p.InFlightPerPartition = orDefault(cfg.InFlightPerPartition, min(p.InFlightPerPartition, max(p.InFlightTotal, 1)))
	switch {
	case p.InFlightTotal > MaxInFlight:
		bad("InFlightTotal", "%d is above the ceiling MaxInFlight (%d): each record in flight costs about 30 KiB besides its bytes", p.InFlightTotal, MaxInFlight)
	case p.InFlightPerPartition > p.InFlightTotal:
		bad("InFlightPerPartition", "%d is above InFlightTotal (%d): a partition cannot run more than the process", p.InFlightPerPartition, p.InFlightTotal)
	}
	if cfg.ConcurrencyFloor > p.InFlightTotal {
		bad("ConcurrencyFloor", "%d is above InFlightTotal (%d), the adaptive limit's ceiling", cfg.ConcurrencyFloor, p.InFlightTotal)
	}
	p.InFlightBytes = orNone(cfg.InFlightBytes, p.InFlightBytes)
	switch cfg.Concurrency {
	case "", ConcurrencyAdaptive:
		p.Concurrency = actors.ConcurrencyAdaptive
	case ConcurrencyFixed:
		p.Concurrency = actors.ConcurrencyFixed
	default:
		bad("Concurrency", "%q: want adaptive or fixed", cfg.Concurrency)
	}
	p.ConcurrencyFloor = orDefault(cfg.ConcurrencyFloor, p.ConcurrencyFloor)
	if cfg.ConcurrencyLaw != "" {
		if p.ConcurrencyLaw, err = limit.ParseLaw(string(cfg.ConcurrencyLaw)); err != nil {
			bad("ConcurrencyLaw", "%v", err)
		}
	}
	p.ConcurrencyTolerance = orDefault(cfg.ConcurrencyTolerance, p.ConcurrencyTolerance)
	if t := cfg.ConcurrencyTolerance; t != 0 && !(t >= 1 && t <= MaxConcurrencyTolerance) {
		bad("ConcurrencyTolerance", "must be at least 1 and at most %g, got %g (zero is the default, 1)", MaxConcurrencyTolerance, t)
	}
	if cfg.Ordering != "" {
		if p.Ordering, err = ordering.ParseMode(string(cfg.Ordering)); err != nil {
			bad("Ordering", "%v", err)
		}
	}
	p.DrainTimeout = orDefault(cfg.DrainTimeout, p.DrainTimeout)
	p.MaxAttempts = orDefault(cfg.MaxAttempts, p.MaxAttempts)
	p.AttemptTimeout = orNone(cfg.AttemptTimeout, p.AttemptTimeout)
	// Each backoff bound's default follows the other one given.
	p.BackoffMin = orDefault(cfg.BackoffMin, min(p.BackoffMin, orDefault(cfg.BackoffMax, p.BackoffMin)))
	p.BackoffMax = orDefault(cfg.BackoffMax, max(p.BackoffMax, p.BackoffMin))
	p.EvidenceWindow = orDefault(cfg.EvidenceWindow, p.EvidenceWindow)
	p.SpanPerPartition = cfg.SpanPerPartition
	p.CommitMetadataMaxBytes = orNone(cfg.CommitMetadataMaxBytes, p.CommitMetadataMaxBytes)
	r.batchSize = orDefault(cfg.BatchSize, DefaultBatchSize)
	r.batchLinger = orDefault(cfg.BatchLinger, DefaultBatchLinger)
	switch {
	case cfg.BatchSize < 0 || cfg.BatchSize > p.InFlightTotal:
		bad("BatchSize", "must be 1 to InFlightTotal (%d), got %d (zero is the default, %d)", p.InFlightTotal, cfg.BatchSize, DefaultBatchSize)
	case cfg.BatchSize == 0:
		r.batchSize = min(r.batchSize, p.InFlightTotal)
	}
	if cfg.BatchLinger < 0 || cfg.BatchLinger > MaxBatchLinger {
		bad("BatchLinger", "must be at most %v and not negative, got %v (zero is the default, %v)", MaxBatchLinger, cfg.BatchLinger, DefaultBatchLinger)
	}
	r.readyPinLimit = orDefault(cfg.ReadyPinLimit, r.readyPinLimit)
	r.progressInterval = orNone(cfg.ProgressInterval, r.progressInterval)
	r.maxBatchBytes = min(orNone(cfg.MaxDecompressedBatchBytes, defaultMaxDecompressedBatchBytes), math.MaxInt32)
	if err := p.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("consumer.Config: %w", err))
	}
	return r, errors.Join(errs...)
}

// legalTopic says why Kafka would refuse name as a topic's.
func legalTopic(name string) error {
	switch {
	case name == "." || name == "..":
		return errors.New("not a topic name Kafka takes")
	case len(name) > 249:
		return fmt.Errorf("%d characters, over Kafka's 249", len(name))
	case !validClientID.MatchString(name):
		return errors.New("a topic's name takes only A-Z, a-z, 0-9, '.', '_' and '-'")
	}
	return nil
}

// collides reports two topic names Kafka holds for the same: it treats '.'
// and '_' as one in its metrics, and refuses the second.
func collides(a, b string) bool {
	return strings.ReplaceAll(a, ".", "_") == strings.ReplaceAll(b, ".", "_")
}

// topics are the topics consumed: Topics, then Topic when Topics does not
// name it.
func (cfg Config) topics() []string {
	out := slices.Clone(cfg.Topics)
	if cfg.Topic != "" && !slices.Contains(out, cfg.Topic) {
		out = append(out, cfg.Topic)
	}
	return out
}

// kafkaVersion accepts the three-part form of versions before 1.0 too
// ("0.11.0" for sarama's "0.11.0.0").
func kafkaVersion(v string) string {
	if strings.HasPrefix(v, "0.") && strings.Count(v, ".") == 2 {
		return v + ".0"
	}
	return v
}

// orDefault returns v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// orNone returns def for zero, 0 (none) for a negative v, and v otherwise.
func orNone[T int | int64 | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}
