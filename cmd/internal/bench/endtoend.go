package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "github.com/lib/pq" // the PostgreSQL driver

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/cmd/internal/checker"
	"github.com/patchflow/patchflow/cmd/internal/listener"
	"github.com/patchflow/patchflow/cmd/internal/loadgen"
	"github.com/patchflow/patchflow/cmd/internal/offsets"
	"github.com/patchflow/patchflow/cmd/internal/platform"
)

// PatchmanSystemsPerSecond is what the original patchman-engine evaluated,
// measured on this kind of machine with such events and its default
// deployment, at 100 ms VMaaS latency (the figure, for scale).
const PatchmanSystemsPerSecond = 6.0

// EndToEndConfig is one configuration of the end-to-end scenario.
type EndToEndConfig struct {
	Name         string // "sequential", "default", "C=64"...
	PerPartition int    // S
	Total        int    // G
	Ordering     string // key or partition
	Events       int
}

// EndToEndResult is one measured configuration.
type EndToEndResult struct {
	EndToEndConfig
	Broker         string  `json:"broker"`
	DBConnections  int     `json:"database_connections"`
	Partitions     int     `json:"partitions"`
	Hosts          int     `json:"hosts"`
	EventBytes     int64   `json:"mean_event_bytes"`
	Seconds        float64 `json:"seconds"`
	SystemsPerSec  float64 `json:"systems_per_second"`
	HandlerMS      float64 `json:"mean_handler_ms"`
	VMaaSMS        float64 `json:"mean_vmaas_ms_per_event"`
	DatabaseMS     float64 `json:"mean_database_ms_per_event"`
	StoreSystemMS  float64 `json:"mean_store_system_ms_per_event"`
	StoreEvalMS    float64 `json:"mean_store_evaluation_ms_per_event"`
	OthersCPUMS    float64 `json:"other_processes_cpu_ms_per_event"` // PostgreSQL and the broker
	OtherMS        float64 `json:"mean_other_ms_per_event"`          // decoding, validation, waiting for CPU
	ProcessCores   float64 `json:"process_cores"`                    // listener + mock CPU seconds per second
	MachineCores   float64 `json:"machine_cores"`                    // every process, PostgreSQL included
	HostsChecked   int     `json:"hosts_checked"`
	HostsWrong     int     `json:"hosts_wrong"`
	HandledTwice   int64   `json:"handled_more_than_once"`
	CommittedToEnd bool    `json:"committed_to_end"`
}

// EndToEnd runs the listener with its real handler on realistic events
// (about 100 KB, 400 packages, 150 repositories, the whole system profile),
// the platform mock with VMaaS at a fixed 100 ms, and PostgreSQL.
type EndToEnd struct {
	DatabaseURL string
	Kafka       []string // a real broker; empty: the in-process one
	Partitions  int
	Hosts       int
	Log         io.Writer
	seed        atomic.Int64
}

// Run measures one configuration on its own hosts, topic and group, so
// runs never see each other's rows or offsets.
func (e *EndToEnd) Run(ctx context.Context, c EndToEndConfig) (EndToEndResult, error) {
	res := EndToEndResult{EndToEndConfig: c, Partitions: e.Partitions, Hosts: e.Hosts}
	// A seed of its own: host ids derive from it, so a configuration never
	// meets hosts an earlier one (or an earlier run on this database) stored.
	seed := time.Now().UnixNano()/1e6 + e.seed.Add(1)
	o := loadgen.DefaultOptions()
	// Only created and updated events: each evaluates one system, so events/s
	// is systems/s (deletes would count without evaluating anything).
	o.Seed, o.Hosts, o.Events, o.BadShare, o.IDOnlyShare, o.DeleteShare = uint64(seed), e.Hosts, c.Events, 0, 0, 0
	ds := platform.NewDataset(o.Seed, platform.DefaultSize())
	mock, err := platform.NewServer(ds, platform.ServerOptions{Faults: platform.Faults{Latency: "fixed:100ms"}, Shape: o.Shape, BulkProfiles: o.Bulk})
	if err != nil {
		return res, err
	}
	mockURL, stopMock, err := platform.Listen(mock)
	if err != nil {
		return res, err
	}
	defer stopMock()

	topic := fmt.Sprintf("bench.inventory.%d.%d", time.Now().Unix(), seed)
	env := map[string]string{
		"KAFKA_TOPIC": topic, "KAFKA_GROUP": topic, "DATABASE_URL": e.DatabaseURL, "VMAAS_URL": mockURL,
		"LISTENER_INFLIGHT_PER_PARTITION": strconv.Itoa(c.PerPartition), "LISTENER_INFLIGHT_TOTAL": strconv.Itoa(c.Total),
		"LISTENER_ORDERING": c.Ordering, "LISTENER_HTTP_ADDR": "", "EMBEDDED_PARTITIONS": strconv.Itoa(e.Partitions),
		"KAFKA_BROKERS": "embedded",
		// Every evaluation calls VMaaS: the answer cache (on by default)
		// would hide the 100 ms, since profiles repeat across hosts.
		"VMAAS_CACHE_SIZE": "0",
	}
	if len(e.Kafka) > 0 {
		env["KAFKA_BROKERS"] = strings.Join(e.Kafka, ",")
	}
	cfg, _, err := listener.Parse(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return res, err
	}
	if cfg.Embedded {
		res.Broker = "kfake"
		cluster, err := listener.StartEmbedded(cfg.Kafka.Topic, cfg.Kafka.DLQTopic, e.Partitions)
		if err != nil {
			return res, err
		}
		defer cluster.Close()
		cfg.Brokers, cfg.Kafka.Brokers = cluster.ListenAddrs(), cluster.ListenAddrs()
	} else {
		res.Broker = "kafka"
		if err := createTopic(cfg.Kafka.Brokers, topic, e.Partitions); err != nil {
			return res, err
		}
	}
	k := cfg.Kafka
	res.DBConnections = cfg.Domain.Pool.MaxOpen
	plan := loadgen.NewPlan(o)
	sent, err := loadgen.Produce(ctx, ds, o, plan, loadgen.ProduceOptions{Brokers: k.Brokers, Topic: k.Topic, Version: k.Version, Compression: "lz4"})
	if err != nil {
		return res, err
	}
	res.EventBytes = sent.Bytes / int64(max(sent.Messages, 1))

	logger := slog.New(slog.DiscardHandler)
	domain, err := listener.NewDomain(ctx, cfg, logger, nil)
	if err != nil {
		return res, err
	}
	defer domain.Close()
	timings := &stageTimings{}
	domain.Evaluator.Timings = timings
	timed := &listener.TimedHandler{Inner: domain.Handler}
	run, err := listener.Start(ctx, cfg, timed, logger)
	if err != nil {
		return res, err
	}
	defer run.Stop()
	total := int64(len(plan.Items))
	stats := run.Bridge.Stats()
	// Every wait also watches the listener: one that stopped is an error
	// now, not after the wait's limit.
	var exited error
	watch := func(cond func() bool, limit time.Duration) bool {
		return waitFor(func() bool {
			select {
			case <-run.Exited():
				exited = fmt.Errorf("listener stopped early: %v", run.Err())
				return true
			default:
			}
			return cond()
		}, limit) && exited == nil
	}
	if !watch(func() bool { return stats.Snapshot().Admitted > 0 }, time.Minute) {
		return res, fmt.Errorf("%s: nothing admitted in a minute: %v", c.Name, exited)
	}
	began, cpu0, machine0 := time.Now(), cpuTime(), machineBusy()
	finished := func(s actors.StatsSnapshot) int64 { return s.Succeeded + s.Skipped + s.DeadLettered }
	if !watch(func() bool { return finished(stats.Snapshot()) >= total }, 10*time.Minute) {
		return res, fmt.Errorf("%s: %d of %d events finished: %v", c.Name, finished(stats.Snapshot()), total, exited)
	}
	elapsed := time.Since(began)
	cpu, machine := cpuTime()-cpu0, machineBusy()-machine0
	res.CommittedToEnd = watch(func() bool { p, err := offsets.Read(k.Brokers, k.Topic, k.Group); return err == nil && p.AtEnd() }, 30*time.Second)
	if exited != nil {
		return res, fmt.Errorf("%s: %v", c.Name, exited)
	}
	if err := run.Stop(); err != nil {
		return res, err
	}
	s := stats.Snapshot()
	res.HandledTwice = finished(s) - total
	res.Seconds = elapsed.Seconds()
	res.SystemsPerSec = float64(total) / res.Seconds
	mean, n := timed.Mean()
	calls := float64(max(n, 1))
	res.HandlerMS = float64(mean) / 1e6
	res.VMaaSMS = float64(timings.vmaas.Load()) / calls / 1e6
	res.DatabaseMS = float64(timings.database.Load()) / calls / 1e6
	res.StoreSystemMS = float64(timings.storeSystem.Load()) / calls / 1e6
	res.StoreEvalMS = float64(timings.storeEvaluation.Load()) / calls / 1e6
	res.OtherMS = max(0, res.HandlerMS-res.VMaaSMS-res.DatabaseMS)
	res.ProcessCores = cpu.Seconds() / res.Seconds
	res.MachineCores = machine.Seconds() / res.Seconds
	res.OthersCPUMS = max(0, res.MachineCores-res.ProcessCores) / res.SystemsPerSec * 1000

	rep, err := checker.Check(ctx, domain.Store.DB(), ds, o.Shape, plan.Expected, 8)
	if err != nil {
		return res, err
	}
	res.HostsChecked, res.HostsWrong = rep.Hosts, rep.Missing+rep.Wrong
	if e.Log != nil {
		fmt.Fprintf(e.Log, "%-6s end-to-end     %-26s S=%-4d G=%-5d %7.1f systems/s  handler %.0f ms (VMaaS %.0f, database %.0f, other %.0f)  cores: process %.2f, machine %.2f (%.0f ms CPU of other processes per event)  hosts wrong %d/%d\n",
			res.Broker, c.Name, c.PerPartition, c.Total, res.SystemsPerSec, res.HandlerMS, res.VMaaSMS, res.DatabaseMS, res.OtherMS,
			res.ProcessCores, res.MachineCores, res.OthersCPUMS, res.HostsWrong, res.HostsChecked)
	}
	return res, nil
}

// stageTimings sums the handler's VMaaS and database time.
type stageTimings struct {
	vmaas, database, storeSystem, storeEvaluation atomic.Int64
}

func (t *stageTimings) VMaaS(d time.Duration, _ error) { t.vmaas.Add(int64(d)) }

func (t *stageTimings) Database(op string, d time.Duration, _ error) {
	t.database.Add(int64(d))
	switch op {
	case "store_system":
		t.storeSystem.Add(int64(d))
	case "store_evaluation":
		t.storeEvaluation.Add(int64(d))
	}
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
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// PostgresVersion asks the server at url for its version and the settings
// that change write throughput most.
func PostgresVersion(url string) (string, error) {
	db, err := sql.Open("postgres", url)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v, fsync, syncCommit, buffers string
	err = db.QueryRow(`SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('shared_buffers')`).Scan(&v, &fsync, &syncCommit, &buffers)
	return fmt.Sprintf("%s (fsync %s, synchronous_commit %s, shared_buffers %s)", v, fsync, syncCommit, buffers), err
}
