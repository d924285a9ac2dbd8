package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	_ "github.com/lib/pq" // the PostgreSQL driver
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/patchflow/patchflow/internal/telemetry"
	"github.com/patchflow/patchflow/proving/checker"
	"github.com/patchflow/patchflow/proving/effects"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/offsets"
	"github.com/patchflow/patchflow/proving/platform"
)

// PatchmanSystemsPerSecond is what the original patchman-engine evaluated,
// measured on this kind of machine with such events and its default
// deployment, at 100 ms VMaaS latency (the figure, for scale).
const PatchmanSystemsPerSecond = 6.0

// BeforeEndToEndCommit is the commit the end-to-end scenario's "before"
// listener is built from: the commit before issue 12, as it was (`make
// bin/listener-before12`).
const BeforeEndToEndCommit = "15648dc"

// Workloads of the end-to-end scenario.
const (
	// WorkloadNewHosts: each host created, then updated with its next
	// profile revision; every event evaluates one system.
	WorkloadNewHosts = "new hosts"
	// WorkloadRecheck: hosts created first (untimed), then re-check-ins,
	// RecheckUnchanged of them with the host's profile unchanged and
	// RecheckChanged with a few packages changed.
	WorkloadRecheck = "re-check-in"
	// WorkloadNewHostsKnownOrgs: WorkloadNewHosts after as many hosts of
	// the same orgs, on the same dataset, were created (untimed), so the
	// orgs have been told of most of their installable advisories, as a
	// live service's have: a new host's evaluation seldom notifies. In
	// WorkloadNewHosts every org is new, and each event adds about 36
	// (org, advisory) pairs to notify.
	WorkloadNewHostsKnownOrgs = "new hosts, known orgs"
)

// The shares of the re-check-in workload's timed events.
const (
	RecheckUnchanged = 0.8
	RecheckChanged   = 0.2
)

// VMaaSLatency is the platform mock's VMaaS latency in the end-to-end
// scenario.
const VMaaSLatency = "fixed:100ms"

// How the scenario watches a listener's /metrics: often while waiting for
// its first record (the window starts there), less often during the window
// (each scrape costs the listener a little CPU).
const (
	StartPoll  = 20 * time.Millisecond
	FinishPoll = 250 * time.Millisecond
)

// EndToEndConfig is one configuration of the end-to-end scenario.
type EndToEndConfig struct {
	Name     string `json:"name"`     // "default", "sequential"...
	Workload string `json:"workload"` // WorkloadNewHosts, WorkloadRecheck or WorkloadNewHostsKnownOrgs
	// PerPartition (S), Total (G) and Ordering are the listener's settings;
	// 0 and "" leave the listener's own defaults.
	PerPartition int    `json:"per_partition_setting"`
	Total        int    `json:"total_setting"`
	Ordering     string `json:"ordering_setting"`
	// Concurrency is LISTENER_CONCURRENCY ("" leaves the build's default);
	// Tolerance LISTENER_CONCURRENCY_TOLERANCE (0 leaves the default).
	Concurrency string  `json:"concurrency_setting,omitempty"`
	Tolerance   float64 `json:"tolerance_setting,omitempty"`
	// Events are the timed events; Hosts the hosts they are about (for
	// re-check-ins, created first, untimed).
	Events int `json:"events"`
	Hosts  int `json:"hosts"`
	// OnlyListener, when set, is the only listener this configuration
	// runs with (ListenerBefore or ListenerAfter).
	OnlyListener string `json:"only_listener,omitempty"`
	// Round is the round of the adaptive comparison this run belongs to
	// (from 1; 0 for a configuration outside it).
	Round int `json:"round,omitempty"`
	// EffectsOff turns the outbox's messages off (REMEDIATIONS,
	// NOTIFICATIONS and PAYLOAD_TRACKER false); otherwise the listener
	// publishes them, as in production, to topics of the run's own.
	EffectsOff bool `json:"effects_off,omitempty"`
}

// Label names the configuration and, in the adaptive comparison, its round.
func (c EndToEndConfig) Label() string {
	if c.Round == 0 {
		return c.Name
	}
	return fmt.Sprintf("%s, round %d", c.Name, c.Round)
}

// CPUPerEvent is CPU milliseconds per event of each process over a
// window; -1 where not measured.
type CPUPerEvent struct {
	Listener float64 `json:"listener"`
	Mock     float64 `json:"platform_mock"`
	// Postgres is the postmaster with every backend and auxiliary process.
	Postgres float64 `json:"postgresql"`
	Kafka    float64 `json:"kafka"`
	// Bench is the benchmark process (the in-process broker too, when no
	// real one is used).
	Bench float64 `json:"benchmark"`
	// Rest is the rest of the machine: other work sharing the cores.
	Rest float64 `json:"rest_of_machine"`
}

// EndToEndResult is one measured configuration of one listener.
type EndToEndResult struct {
	EndToEndConfig
	Listener   string `json:"listener"` // before or after
	Broker     string `json:"broker"`
	Partitions int    `json:"partitions"`
	// The listener's effective S, G and database pool, from its status page.
	InFlightPerPartition int `json:"per_partition"`
	InFlightTotal        int `json:"total"`
	// Concurrency is the effective LISTENER_CONCURRENCY ("fixed" for a
	// build that predates it); MeanLimit, MeanBaselineMS and MeanInFlight
	// average its patchflow_concurrency_limit, _baseline_seconds and
	// patchflow_in_flight_records over the window's scrapes (0 for a build
	// without them).
	Concurrency    string  `json:"concurrency"`
	MeanLimit      float64 `json:"mean_limit"`
	MeanBaselineMS float64 `json:"mean_baseline_ms"`
	MeanInFlight   float64 `json:"mean_in_flight"`
	DBConnections  int     `json:"database_connections"`
	EventBytes     int64   `json:"mean_event_bytes"`
	// Seconds is the window, PerSecond the events over it (systems/s for
	// new hosts).
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"events_per_second"`
	// Handler attempts (the listener's patchflow_handler_duration_seconds):
	// the mean exactly, p50 and p99 to the histogram's bucket.
	HandlerAttempts int64   `json:"handler_attempts"`
	HandlerMeanMS   float64 `json:"handler_mean_ms"`
	HandlerP50MS    float64 `json:"handler_p50_ms"`
	HandlerP99MS    float64 `json:"handler_p99_ms"`
	// Time per event in VMaaS calls and database transactions (by
	// operation), and the handler's rest.
	VMaaSMS      float64            `json:"vmaas_ms_per_event"`
	DatabaseMS   float64            `json:"database_ms_per_event"`
	DatabaseByOp map[string]float64 `json:"database_ms_per_event_by_operation"`
	OtherMS      float64            `json:"other_ms_per_event"`
	CPU          CPUPerEvent        `json:"cpu_ms_per_event"`
	MachineCores float64            `json:"machine_cores"`
	// Statements is what each statement cost PostgreSQL per event over the
	// window, costliest first, and WALBytesPerEvent the WAL the server
	// wrote per event (none when the server had no pg_stat_statements).
	Statements       []StatementCost `json:"statements,omitempty"`
	WALBytesPerEvent float64         `json:"wal_bytes_per_event,omitempty"`
	HostsChecked     int             `json:"hosts_checked"`
	HostsWrong       int             `json:"hosts_wrong"`
	// Unchanged and Changed count the timed re-check-ins with the host's
	// profile unchanged and with a few packages changed.
	Unchanged int `json:"recheck_unchanged,omitempty"`
	Changed   int `json:"recheck_changed,omitempty"`
	// Skipped counts events the listener skipped by design (committed,
	// not evaluated); HandledTwice the events finished more than once.
	Skipped        int64 `json:"skipped"`
	HandledTwice   int64 `json:"handled_more_than_once"`
	CommittedToEnd bool  `json:"committed_to_end"`
	// Postgres is what the listener's database had in force; Publishable
	// is false when that was not durable.
	Postgres    PostgresSettings `json:"postgres"`
	Publishable bool             `json:"publishable"`
	// HostsForgotten: the hosts the runs before this one stored were
	// deleted before it (forgetSystems; each run of the adaptive
	// comparison since d667aba). False in reports from before.
	HostsForgotten bool `json:"hosts_forgotten,omitempty"`
	// Effects: the messages the listener's outbox published over the run
	// (read back from their topics), and the outbox's lag: each payload
	// status's time on the broker less the time the listener stamped it
	// with before its transaction, p99 and max. Zero without effects.
	EffectMessages int     `json:"effect_messages,omitempty"`
	OutboxLagP99MS float64 `json:"outbox_lag_p99_ms,omitempty"`
	OutboxLagMaxMS float64 `json:"outbox_lag_max_ms,omitempty"`
}

// EndToEnd runs listener binaries, each in its own process, with their real
// handler on realistic events (about 100 KB, 400 packages, 150
// repositories, the whole system profile), the platform mock in its own
// process with VMaaS at VMaaSLatency, and PostgreSQL: each listener writes
// to a database of its own on the server, each configuration reads a topic
// and group of its own.
type EndToEnd struct {
	DatabaseURL string   // the server: a database of it, beside which the listeners' are created
	Kafka       []string // a real broker; empty: an in-process one, started by Prepare
	KafkaPID    int      // the real broker's process, for its CPU (0: not measured)
	MockBin     string   // cmd/platform-mock
	Partitions  int
	Work        string // the processes' logs
	Log         io.Writer
	// AllowNotDurable measures on a server that is not durable (fsync,
	// synchronous_commit or full_page_writes off) instead of refusing; the
	// results say they are not publishable.
	AllowNotDurable bool
	// Env is extra settings of every listener process (tests).
	Env []string
	// Profile, when set, is a directory: each timed listener serves Go's
	// profiler (LISTENER_PPROF) and leaves there a CPU profile of the
	// window's first ProfileSeconds and its allocations since it started.
	// The profiler costs CPU while it samples: figures of a profiled run
	// are not comparable with others.
	Profile        string
	ProfileSeconds int

	Postgres   PostgresSettings // the server's, read by Prepare
	postmaster int              // 0: not on this machine
	cluster    *kfake.Cluster
	databases  map[string]string // listener -> database name
	seed       atomic.Int64
}

// Prepare reads the server's settings and refuses one that is not durable
// (unless AllowNotDurable), finds its postmaster, and starts the in-process
// broker when no real one is given.
func (e *EndToEnd) Prepare(ctx context.Context) error {
	s, err := ReadPostgresSettings(ctx, e.DatabaseURL)
	if err != nil {
		return err
	}
	e.Postgres = s
	if err := e.refuse(s); err != nil {
		return err
	}
	if e.postmaster, err = postmasterPID(ctx, e.DatabaseURL); err != nil {
		return err
	}
	if len(e.Kafka) == 0 {
		if e.cluster, err = kfake.NewCluster(kfake.NumBrokers(1)); err != nil {
			return err
		}
	}
	e.databases = map[string]string{}
	return nil
}

// refuse returns an error for settings that are not durable, unless
// AllowNotDurable.
func (e *EndToEnd) refuse(s PostgresSettings) error {
	if s.Durable() || e.AllowNotDurable {
		return nil
	}
	return fmt.Errorf("end to end: PostgreSQL runs with %s, which no published figure may come from: start it at its default durability "+
		"(PATCHFLOW_PG_DURABLE=1 .ci/postgres with ...), or pass -allow-not-durable for a smoke run whose report says it is not publishable", s.NotDurable())
}

// Close drops the databases the scenario created and stops the in-process
// broker.
func (e *EndToEnd) Close() error {
	var errs []error
	for _, name := range e.databases {
		errs = append(errs, dropDatabase(context.Background(), e.DatabaseURL, name))
	}
	e.databases = nil
	if e.cluster != nil {
		e.cluster.Close()
		e.cluster = nil
	}
	return errors.Join(errs...)
}

func (e *EndToEnd) brokers() []string {
	if e.cluster != nil {
		return e.cluster.ListenAddrs()
	}
	return e.Kafka
}

// database returns the URL of listener's database, created on first use.
func (e *EndToEnd) database(ctx context.Context, listener string) (string, error) {
	if name, ok := e.databases[listener]; ok {
		return databaseURL(e.DatabaseURL, name)
	}
	name := fmt.Sprintf("patchflow_bench_%s_%d", listener, time.Now().UnixNano())
	u, err := createDatabase(ctx, e.DatabaseURL, name)
	if err != nil {
		return "", err
	}
	e.databases[listener] = name
	return u, nil
}

// Run measures configuration c of listener (the binary bin) on hosts,
// topic and group of its own, in listener's database.
func (e *EndToEnd) Run(ctx context.Context, listener, bin string, c EndToEndConfig) (EndToEndResult, error) {
	res := EndToEndResult{EndToEndConfig: c, Listener: listener, Partitions: e.Partitions, Broker: "kafka", CPU: CPUPerEvent{Postgres: -1, Kafka: -1}}
	if e.cluster != nil {
		res.Broker = "kfake"
	}
	fail := func(err error) (EndToEndResult, error) {
		return res, fmt.Errorf("end to end, %s listener, %s (%s): %w", listener, c.Label(), c.Workload, err)
	}
	dbURL, err := e.database(ctx, listener)
	if err != nil {
		return fail(err)
	}
	// What this database has in force (a database or role can override the
	// server's settings).
	if res.Postgres, err = ReadPostgresSettings(ctx, dbURL); err != nil {
		return fail(err)
	}
	if err := e.refuse(res.Postgres); err != nil {
		return fail(err)
	}
	if c.Round > 0 {
		if err := forgetSystems(ctx, dbURL); err != nil {
			return fail(err)
		}
		res.HostsForgotten = true
	}
	res.Publishable = res.Postgres.Durable()

	// A seed of its own: host ids derive from it, so a configuration never
	// meets hosts an earlier one stored.
	seed := uint64(time.Now().UnixNano()/1e6 + e.seed.Add(1))
	o := loadgen.DefaultOptions()
	// Only created and updated events: each evaluates one system, so events/s
	// is systems/s (deletes would count without evaluating anything).
	o.Seed, o.Hosts, o.Events, o.BadShare, o.IDOnlyShare, o.DeleteShare, o.SkipShare = seed, c.Hosts, c.Events, 0, 0, 0, 0
	untimed := 0
	switch c.Workload {
	case WorkloadNewHosts:
	case WorkloadNewHostsKnownOrgs:
		// loadgen creates every host before it updates any: the first
		// c.Hosts are the untimed ones, then c.Hosts new hosts and the
		// updates, as WorkloadNewHosts has them.
		o.Hosts, o.Events, untimed = 2*c.Hosts, c.Events+c.Hosts, c.Hosts
	case WorkloadRecheck:
		o.Events, untimed = c.Hosts+c.Events, c.Hosts
		o.RecheckShare, o.ChangeShare = RecheckUnchanged, RecheckChanged
	default:
		return fail(fmt.Errorf("unknown workload %q", c.Workload))
	}
	plan := loadgen.NewPlan(o)
	ds := platform.NewDataset(o.Seed, platform.DefaultSize())

	mock, mockURL, err := e.startMock(fmt.Sprintf("%s-%d", listener, seed), o)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = mock.stop(30 * time.Second) }()

	topic := fmt.Sprintf("bench.e2e.%s.%d", listener, seed)
	brokers := e.brokers()
	if err := createTopic(brokers, topic, e.Partitions); err != nil {
		return fail(err)
	}
	fxTopics := effects.Topics{Remediations: topic + ".remediations", Notifications: topic + ".notifications", PayloadStatus: topic + ".payload-status"}
	for _, t := range fxTopics.List() {
		if err := createTopic(brokers, t, e.Partitions); err != nil {
			return fail(err)
		}
	}
	env := []string{
		"KAFKA_BROKERS=" + strings.Join(brokers, ","), "KAFKA_TOPIC=" + topic, "KAFKA_GROUP=" + topic,
		"REMEDIATIONS_TOPIC=" + fxTopics.Remediations, "NOTIFICATIONS_TOPIC=" + fxTopics.Notifications,
		"PAYLOAD_TRACKER_TOPIC=" + fxTopics.PayloadStatus,
		"DATABASE_URL=" + dbURL, "VMAAS_URL=" + mockURL, "INVENTORY_URL=" + mockURL,
		// Every evaluation calls VMaaS: the answer cache (on by default)
		// would hide the 100 ms, since profiles repeat across hosts.
		"VMAAS_CACHE_SIZE=0",
		"LISTENER_PROGRESS_INTERVAL=0", "LOG_LEVEL=warn", "LOG_FORMAT=json",
	}
	if c.PerPartition > 0 {
		env = append(env, "LISTENER_INFLIGHT_PER_PARTITION="+strconv.Itoa(c.PerPartition))
	}
	if c.Total > 0 {
		env = append(env, "LISTENER_INFLIGHT_TOTAL="+strconv.Itoa(c.Total))
	}
	if c.Ordering != "" {
		env = append(env, "LISTENER_ORDERING="+c.Ordering)
	}
	if c.Concurrency != "" {
		env = append(env, "LISTENER_CONCURRENCY="+c.Concurrency)
	}
	if c.Tolerance != 0 {
		env = append(env, "LISTENER_CONCURRENCY_TOLERANCE="+strconv.FormatFloat(c.Tolerance, 'g', -1, 64))
	}
	if c.EffectsOff {
		env = append(env, "REMEDIATIONS=false", "NOTIFICATIONS=false", "PAYLOAD_TRACKER=false")
	}
	env = append(env, e.Env...)
	if e.Profile != "" {
		env = append(env, "LISTENER_PPROF=true")
	}
	produce := func(items []loadgen.Item) (loadgen.Result, error) {
		return loadgen.Produce(ctx, ds, o, &loadgen.Plan{Items: items}, loadgen.ProduceOptions{Brokers: brokers, Topic: topic, Version: sarama.V3_6_0_0, Compression: "lz4"})
	}
	logName := func(part string) string {
		return filepath.Join(e.Work, fmt.Sprintf("e2e-%s-%s-%d-%s.log", listener, strings.NewReplacer("=", "", " ", "", ",", "").Replace(c.Label()), seed, part))
	}

	// Re-check-ins, known orgs: the hosts are created first by a listener
	// process of the same build, which commits to the end and stops (its
	// relay publishing what waits in the outbox), untimed.
	if untimed > 0 {
		if _, err := produce(plan.Items[:untimed]); err != nil {
			return fail(err)
		}
		l, err := e.startListener(listener+" listener (creating the hosts)", bin, logName("create"), env)
		if err != nil {
			return fail(err)
		}
		err = l.waitStarted(2 * time.Minute)
		if err == nil {
			_, err = l.waitFinished(int64(untimed), 15*time.Minute)
		}
		if err == nil {
			err = waitCommitted(brokers, topic, l.proc)
		}
		if err == nil {
			err = l.proc.stop(time.Minute)
		}
		l.proc.kill9()
		if err != nil {
			return fail(withLog(err, l.proc))
		}
	}
	timed := plan.Items[untimed:]
	sent, err := produce(timed)
	if err != nil {
		return fail(err)
	}
	res.Events, res.EventBytes = len(timed), sent.Bytes/int64(max(sent.Messages, 1))
	res.Unchanged, res.Changed = plan.Rechecks[loadgen.RecheckRepeat], plan.Rechecks[loadgen.RecheckChange]

	l, err := e.startListener(listener+" listener", bin, logName("listener"), env)
	if err != nil {
		return fail(err)
	}
	defer l.proc.kill9()
	meter := e.meter(l.proc.cmd.Process.Pid, mock.cmd.Process.Pid)
	if err := l.waitStarted(2 * time.Minute); err != nil {
		return fail(withLog(err, l.proc))
	}
	stmts, err := startStatements(ctx, dbURL)
	if err != nil {
		return fail(err)
	}
	began, cpu0 := time.Now(), meter.read()
	profiled := make(chan error, 1)
	profileName := func(kind string) string {
		return filepath.Join(e.Profile, fmt.Sprintf("%s-%s-%s-%s.pprof", listener, strings.ReplaceAll(c.Workload, " ", "-"),
			strings.NewReplacer("=", "", " ", "", ",", "").Replace(c.Label()), kind))
	}
	if e.Profile != "" {
		go func() {
			profiled <- savePprof(l.addr, fmt.Sprintf("profile?seconds=%d", e.ProfileSeconds), profileName("cpu"), time.Duration(e.ProfileSeconds+30)*time.Second)
		}()
	}
	final, err := l.waitFinished(int64(len(timed)), 15*time.Minute)
	if err != nil {
		return fail(withLog(err, l.proc))
	}
	if e.Profile != "" {
		err := <-profiled
		if err == nil {
			err = savePprof(l.addr, "allocs", profileName("allocs"), 30*time.Second)
		}
		if err != nil {
			return fail(err)
		}
	}
	res.MeanLimit, res.MeanBaselineMS, res.MeanInFlight = l.limits.means()
	elapsed, cpu1 := time.Since(began), meter.read()
	if res.Statements, res.WALBytesPerEvent, err = stmts.read(ctx, float64(len(timed))); err != nil {
		return fail(err)
	}
	if settings, err := l.settings(); err == nil {
		res.InFlightPerPartition, _ = strconv.Atoi(settings["LISTENER_INFLIGHT_PER_PARTITION"])
		res.InFlightTotal, _ = strconv.Atoi(settings["LISTENER_INFLIGHT_TOTAL"])
		res.DBConnections, _ = strconv.Atoi(settings["DB_MAX_OPEN_CONNS"])
		res.Concurrency = settings["LISTENER_CONCURRENCY"]
		if res.Concurrency == "" {
			res.Concurrency = "fixed"
		}
	}
	res.CommittedToEnd = waitCommitted(brokers, topic, l.proc) == nil
	if err := l.proc.stop(time.Minute); err != nil { // the relay publishes what waits, then stops
		return fail(err)
	}
	if res.EffectMessages, res.OutboxLagP99MS, res.OutboxLagMaxMS, err = outboxLag(brokers, fxTopics); err != nil {
		return fail(err)
	}

	n := float64(len(timed))
	res.Seconds = elapsed.Seconds()
	res.PerSecond = n / res.Seconds
	finished := int64(final.sum("patchflow_records_total", outcomeIn("ok", "skipped", "dead_lettered")))
	res.HandledTwice = finished - int64(len(timed))
	res.Skipped = int64(final.sum("patchflow_records_total", outcomeIn("skipped")))
	h := final.histogramOf("patchflow_handler_duration_seconds")
	res.HandlerAttempts = int64(h.count)
	res.HandlerMeanMS, res.HandlerP50MS, res.HandlerP99MS = h.mean()*1000, h.quantile(0.5)*1000, h.quantile(0.99)*1000
	// A listener since issue 25 reports each dependency's calls in one
	// histogram; an earlier build (the one before issue 12) had one per
	// dependency, the database's by operation. Each build exports one kind.
	deps := final.byLabel("patchflow_dependency_duration_seconds_sum", "dependency")
	res.VMaaSMS = (deps["vmaas"] + final.sum("patchflow_vmaas_request_duration_seconds_sum", nil)) / n * 1000
	res.DatabaseMS = deps["database"] / n * 1000
	if ops := final.byLabel("patchflow_database_duration_seconds_sum", "operation"); len(ops) > 0 {
		res.DatabaseByOp = map[string]float64{}
		for op, secs := range ops {
			res.DatabaseByOp[op] = secs / n * 1000
			res.DatabaseMS += secs / n * 1000
		}
	}
	res.OtherMS = max(0, h.sum/n*1000-res.VMaaSMS-res.DatabaseMS)
	res.CPU, res.MachineCores = cpu1.perEvent(cpu0, n), (cpu1.machine-cpu0.machine).Seconds()/res.Seconds

	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	rep, err := checker.Check(ctx, db, ds, o.Shape, plan.Expected, 8)
	if err != nil {
		return fail(fmt.Errorf("check the hosts: %w", err))
	}
	res.HostsChecked, res.HostsWrong = rep.Hosts, rep.Missing+rep.Wrong
	if e.Log != nil {
		fmt.Fprintf(e.Log, "%-6s end-to-end     %-6s %-11s %-10s S=%-4d G=%-5d %7.1f events/s  handler mean %.0f ms, p50 %.0f, p99 %.0f (VMaaS %.0f, database %.0f, other %.0f per event)  CPU ms/event: listener %.1f, mock %.1f, PostgreSQL %s, Kafka %s, bench %.1f, rest %.1f  %s limit %.0f (baseline %.0f ms), in flight %.0f  hosts wrong %d/%d%s\n",
			res.Broker, listener, c.Workload, c.Label(), res.InFlightPerPartition, res.InFlightTotal, res.PerSecond, res.HandlerMeanMS, res.HandlerP50MS, res.HandlerP99MS,
			res.VMaaSMS, res.DatabaseMS, res.OtherMS, res.CPU.Listener, res.CPU.Mock, msText(res.CPU.Postgres), msText(res.CPU.Kafka), res.CPU.Bench, res.CPU.Rest,
			res.Concurrency, res.MeanLimit, res.MeanBaselineMS, res.MeanInFlight, res.HostsWrong, res.HostsChecked, map[bool]string{true: "", false: "  NOT PUBLISHABLE: PostgreSQL with " + res.Postgres.NotDurable()}[res.Publishable])
	}
	if !rep.OK() && e.Log != nil {
		fmt.Fprintf(e.Log, "       end-to-end     %s listener, %s (%s): %s; for example %v\n", listener, c.Label(), c.Workload, rep, rep.Examples)
	}
	return res, nil
}

// outboxLag reads the effect topics back: how many messages they hold, and
// the payload statuses' lag from the listener's stamp to the broker, p99
// and max, in milliseconds.
func outboxLag(brokers []string, t effects.Topics) (messages int, p99, maxMS float64, err error) {
	var lags []float64
	for _, topic := range t.List() {
		recs, err := effects.Read(brokers, sarama.V3_6_0_0, topic)
		if err != nil {
			return 0, 0, 0, err
		}
		messages += len(recs)
		if topic != t.PayloadStatus {
			continue
		}
		for _, r := range recs {
			var st struct {
				Date time.Time `json:"date"`
			}
			if json.Unmarshal(r.Value, &st) == nil && !st.Date.IsZero() && !r.Timestamp.IsZero() {
				lags = append(lags, float64(r.Timestamp.Sub(st.Date))/1e6)
			}
		}
	}
	if len(lags) == 0 {
		return messages, 0, 0, nil
	}
	slices.Sort(lags)
	return messages, lags[min(len(lags)-1, int(math.Ceil(0.99*float64(len(lags))))-1)], lags[len(lags)-1], nil
}

// msText prints CPU ms per event, or – when not measured.
func msText(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}

func outcomeIn(outcomes ...string) func(map[string]string) bool {
	return func(l map[string]string) bool {
		for _, o := range outcomes {
			if l["outcome"] == o {
				return true
			}
		}
		return false
	}
}

// startMock starts the platform mock binary with the dataset of o's seed,
// VMaaS at VMaaSLatency, serving profiles of o's shape, and waits until it
// answers.
func (e *EndToEnd) startMock(name string, o loadgen.Options) (*listenerProc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	size := platform.DefaultSize()
	p, err := startListener("platform mock", e.MockBin, filepath.Join(e.Work, "e2e-mock-"+name+".log"),
		"MOCK_ADDR="+addr, "MOCK_SEED="+strconv.FormatUint(o.Seed, 10), "MOCK_LATENCY="+VMaaSLatency, "MOCK_ERROR_RATE=0",
		"MOCK_PACKAGES="+strconv.Itoa(size.Packages), "MOCK_REPOS="+strconv.Itoa(size.Repos), "MOCK_ADVISORIES="+strconv.Itoa(size.Advisories),
		"MOCK_PROFILE_PACKAGES="+strconv.Itoa(o.Shape.Packages), "MOCK_PROFILE_REPOS="+strconv.Itoa(o.Shape.Repos), "MOCK_BULK_PROFILES="+strconv.FormatBool(o.Bulk))
	if err != nil {
		return nil, "", err
	}
	url := "http://" + addr
	c := http.Client{Timeout: time.Second}
	err = poll("the platform mock", 20*time.Millisecond, 30*time.Second, func() (bool, error) {
		if err := p.alive(); err != nil {
			return false, err
		}
		resp, err := c.Get(url + "/healthz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		p.kill9()
		return nil, "", err
	}
	return p, url, nil
}

// e2eListener is a listener process of the scenario and its HTTP address.
type e2eListener struct {
	proc   *listenerProc
	addr   string
	limits limitWatch
}

func (e *EndToEnd) startListener(name, bin, logPath string, env []string) (*e2eListener, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p, err := startListener(name, bin, logPath, append(env, "LISTENER_HTTP_ADDR="+addr)...)
	if err != nil {
		return nil, err
	}
	return &e2eListener{proc: p, addr: addr}, nil
}

// waitStarted waits until the listener has admitted a record (one in
// flight or finished), polling its metrics every StartPoll.
func (l *e2eListener) waitStarted(limit time.Duration) error {
	return poll("the listener's first record", StartPoll, limit, func() (bool, error) {
		if err := l.proc.alive(); err != nil {
			return false, err
		}
		m, err := fetchMetrics("http://" + l.addr + "/metrics")
		if err != nil {
			return false, nil // not serving yet
		}
		return m.sum("patchflow_in_flight_records", nil) > 0 || m.sum("patchflow_records_total", nil) > 0, nil
	})
}

// waitFinished waits until the listener has finished total records (ok,
// skipped or dead-lettered), polling every FinishPoll, and returns that
// scrape.
func (l *e2eListener) waitFinished(total int64, limit time.Duration) (scrape, error) {
	var last scrape
	err := poll(fmt.Sprintf("%d records finished", total), FinishPoll, limit, func() (bool, error) {
		if err := l.proc.alive(); err != nil {
			return false, err
		}
		m, err := fetchMetrics("http://" + l.addr + "/metrics")
		if err != nil {
			return false, nil // alive: try again
		}
		last = m
		l.limits.add(m)
		return int64(m.sum("patchflow_records_total", outcomeIn("ok", "skipped", "dead_lettered"))) >= total, nil
	})
	return last, err
}

// limitWatch averages the listener's concurrency limit and its baseline
// over the window's scrapes.
type limitWatch struct {
	n                   int
	limit, baseline, in float64
}

func (w *limitWatch) add(m scrape) {
	w.n++
	w.limit += m.sum("patchflow_concurrency_limit", nil)
	w.baseline += m.sum("patchflow_concurrency_baseline_seconds", nil)
	w.in += m.sum("patchflow_in_flight_records", nil)
}

// means returns the mean limit, baseline (ms) and records in flight.
func (w *limitWatch) means() (limit, baselineMS, inFlight float64) {
	if w.n == 0 {
		return 0, 0, 0
	}
	n := float64(w.n)
	return w.limit / n, w.baseline / n * 1000, w.in / n
}

// settings reads the listener's effective settings from /status.json.
func (l *e2eListener) settings() (map[string]string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + l.addr + "/status.json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st telemetry.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, s := range st.Settings {
		out[s.Name] = s.Value
	}
	return out, nil
}

// waitCommitted waits up to 30 s for the group (named as the topic) to
// commit the end offsets while p runs.
func waitCommitted(brokers []string, topic string, p *listenerProc) error {
	return poll("the group's committed offsets at the end offsets", 100*time.Millisecond, 30*time.Second, func() (bool, error) {
		if err := p.alive(); err != nil {
			return false, err
		}
		pr, err := offsets.Read(brokers, topic, topic)
		return err == nil && pr.AtEnd(), nil
	})
}

// cpuMeter reads the CPU time of the scenario's processes.
type cpuMeter struct {
	listener, mock, postgres, kafka func() (time.Duration, error) // nil: not measured
}

// cpuReading is one reading of every process (-1: not measured or gone)
// and of the whole machine.
type cpuReading struct {
	listener, mock, postgres, kafka, bench, machine time.Duration
}

func (e *EndToEnd) meter(listenerPID, mockPID int) cpuMeter {
	m := cpuMeter{
		listener: func() (time.Duration, error) { return processCPU(listenerPID) },
		mock:     func() (time.Duration, error) { return processCPU(mockPID) },
	}
	if pm := e.postmaster; pm > 0 {
		m.postgres = func() (time.Duration, error) { return treeCPU(pm) }
	}
	if pid := e.KafkaPID; pid > 0 && e.cluster == nil {
		m.kafka = func() (time.Duration, error) { return processCPU(pid) }
	}
	return m
}

func (m cpuMeter) read() cpuReading {
	get := func(f func() (time.Duration, error)) time.Duration {
		if f == nil {
			return -1
		}
		d, err := f()
		if err != nil {
			return -1
		}
		return d
	}
	return cpuReading{listener: get(m.listener), mock: get(m.mock), postgres: get(m.postgres), kafka: get(m.kafka), bench: cpuTime(), machine: machineBusy()}
}

// perEvent is the CPU ms per event of each process from earlier to r, over
// n events; the rest of the machine is its busy time less theirs.
func (r cpuReading) perEvent(earlier cpuReading, n float64) CPUPerEvent {
	measured := time.Duration(0)
	ms := func(now, then time.Duration) float64 {
		if now < 0 || then < 0 {
			return -1
		}
		measured += now - then
		return float64(now-then) / float64(time.Millisecond) / n
	}
	c := CPUPerEvent{
		Listener: ms(r.listener, earlier.listener), Mock: ms(r.mock, earlier.mock),
		Postgres: ms(r.postgres, earlier.postgres), Kafka: ms(r.kafka, earlier.kafka), Bench: ms(r.bench, earlier.bench),
	}
	c.Rest = math.Max(0, float64(r.machine-earlier.machine-measured)/float64(time.Millisecond)/n)
	return c
}

// machineBusy returns the CPU time every process on the machine has used
// (user, nice, system, irq, softirq, steal from /proc/stat).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system, irq softirq steal (guest is in user)
		if i < len(f) {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * clockTick
}

// savePprof saves the listener at addr's profile path (under /debug/pprof/)
// to file.
func savePprof(addr, path, file string, timeout time.Duration) error {
	c := http.Client{Timeout: timeout}
	resp, err := c.Get("http://" + addr + "/debug/pprof/" + path)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", path, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	return os.WriteFile(file, b, 0o644)
}
