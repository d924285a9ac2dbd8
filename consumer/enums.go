package consumer

// The Config fields that take one of a few values have a type each, with a
// constant per value; the zero value ("") is each field's default. Untyped
// string constants ("key") convert as before; a value outside the list is
// refused by New, naming the field and the values it takes.

// Ordering is how the records of a partition may run at once.
type Ordering string

const (
	// OrderingKey runs one record per key at a time, in offset order;
	// records of different keys run at once. The default.
	OrderingKey Ordering = "key"
	// OrderingPartition runs one record of a partition at a time.
	OrderingPartition Ordering = "partition"
	// OrderingUnordered runs any records of a partition at once.
	OrderingUnordered Ordering = "unordered"
)

// Isolation is how records of transactional producers are read.
type Isolation string

const (
	// IsolationReadCommitted reads only committed transactions' records.
	// The default.
	IsolationReadCommitted Isolation = "read_committed"
	// IsolationReadUncommitted reads every record, aborted ones included.
	IsolationReadUncommitted Isolation = "read_uncommitted"
)

// Assignor is how the group spreads partitions over its members.
type Assignor string

const (
	// AssignorCooperativeSticky moves only the partitions that change
	// owner at a rebalance; the others keep running. The default; needs
	// KafkaVersion 2.4.0 or later.
	AssignorCooperativeSticky Assignor = "cooperative-sticky"
	// AssignorSticky keeps partitions with their owners where it can, but
	// is eager: every rebalance drains every partition of every member.
	AssignorSticky Assignor = "sticky"
	// AssignorRange gives each member a range of each topic's partitions;
	// eager.
	AssignorRange Assignor = "range"
	// AssignorRoundRobin deals the partitions out in turn; eager.
	AssignorRoundRobin Assignor = "roundrobin"
)

// Concurrency is how the process-wide in-flight limit is set.
type Concurrency string

const (
	// ConcurrencyAdaptive moves the limit between ConcurrencyFloor and
	// InFlightTotal following the handler's latency. The default.
	ConcurrencyAdaptive Concurrency = "adaptive"
	// ConcurrencyFixed keeps the limit at InFlightTotal.
	ConcurrencyFixed Concurrency = "fixed"
)

// ConcurrencyLaw is the adaptive limit's control law.
type ConcurrencyLaw string

const (
	// LawGradient scales the limit by the ratio of no-load to current
	// latency. The default.
	LawGradient ConcurrencyLaw = "gradient"
	// LawVegas estimates the records queueing downstream.
	LawVegas ConcurrencyLaw = "vegas"
	// LawAIMD adds one per window while latency holds and takes a tenth
	// off when it rises.
	LawAIMD ConcurrencyLaw = "aimd"
)

// SASLMechanism is how the consumer logs in to the brokers.
type SASLMechanism string

const (
	// SASLNone: no SASL. The default.
	SASLNone SASLMechanism = ""
	// SASLPlain sends the user and password as they are: use it with TLS.
	SASLPlain SASLMechanism = "PLAIN"
	// SASLScramSHA256 proves the password without sending it (SHA-256).
	SASLScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	// SASLScramSHA512 proves the password without sending it (SHA-512).
	SASLScramSHA512 SASLMechanism = "SCRAM-SHA-512"
)

// CommitMode is how a consumer commits its offsets, and with them the
// results its handler produces.
type CommitMode string

const (
	// CommitPeriodic commits the offsets (with their metadata) through the
	// group every CommitInterval, and produces each record's results,
	// acknowledged, before the record finishes: every result is written at
	// least once. The default.
	CommitPeriodic CommitMode = "periodic"
	// CommitTransactional writes each claim's results and its offsets in
	// one Kafka transaction every CommitInterval, through a transactional
	// producer per partition: a reader of the results under
	// read_committed sees each finished record's results once, together
	// with the commit that calls it finished, or neither.
	CommitTransactional CommitMode = "transactional"
)
