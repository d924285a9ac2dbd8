// Package demo runs the product end to end on one machine: an in-process
// Kafka broker, the platform mock (VMaaS and inventory) with realistic
// latency, a stream of realistic inventory events from loadgen, the listener
// with its defaults against PostgreSQL, live progress, and a summary that
// checks every host in the database against the last event sent for it,
// the bad messages against the dead-letter topic, and the messages the
// listener must skip against its counts by reason.
package demo

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/proving/effects"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// Options choose the demo's size and the platform's behaviour.
type Options struct {
	Load         loadgen.Options
	Dataset      platform.DatasetSize
	VMaaSLatency string // platform.ParseLatency form
	// Lead bounds the broker's backlog: the producer runs at most this many
	// messages ahead of the consumer group's committed offsets, and the
	// demo deletes from the broker what the group committed.
	Lead int
	// CompareEvents is the size of the stream on which the pipeline and
	// the sequential design (one record at a time per partition) are
	// measured, in turn, in the same conditions (0: no comparison). With
	// bad messages and messages to skip, the stream must fit in Lead.
	CompareEvents int
}

// DefaultOptions: 20,000 realistic events, VMaaS at a long-tailed 100 ms,
// 0.5% bad messages and 0.5% messages the listener skips on top; at most
// 1,000 messages past the committed offsets (about 100 MB once the
// consumer has fetched them, which it does: with the records in flight and
// the broker's share, a lead of 2,000 took the process to 1.5 GB); both
// designs compared on 900 events (910 messages, within the lead).
func DefaultOptions() Options {
	o := loadgen.DefaultOptions()
	o.BadShare, o.SkipShare = 0.005, 0.005
	return Options{Load: o, Dataset: platform.DefaultSize(), VMaaSLatency: "longtail:100ms", Lead: 1000, CompareEvents: 900}
}

// VMaaSCacheSize is the VMaaS answer cache the demo's command gives the
// listener (VMAAS_CACHE_SIZE) unless the environment sets one: the
// listener's default of 10,000 answers would hold over 1 GB at the demo's
// 400-package profiles (a heap profile puts an answer at about 113 KB),
// where this stream repeats a profile about once in a hundred evaluations
// (32 of 2,892 reached the cache in a 3,000-event run with 2,000 answers).
const VMaaSCacheSize = "1000"

// Report is what the demo measured.
type Report struct {
	Main       Measured
	Pipeline   *Measured // the comparison's runs; nil without one
	Sequential *Measured
	// Fixed is the comparison's pipeline with its limit fixed at G, when
	// the listener's limit is adaptive (nil otherwise).
	Fixed *Measured
}

// Measured is one run of the listener.
type Measured struct {
	Events     int           // messages on its topic
	Finished   time.Duration // from the first record admitted to every record finished
	Rate       float64       // Events / Finished
	MaxLead    int64         // the producer's largest lead over the committed offsets
	MaxHeld    int64         // the most records the broker held for its topic, read every 100 ms
	MeanHandle time.Duration // mean handler time
}

func measured(r streamResult) *Measured {
	return &Measured{Events: int(r.total), Finished: r.finishedAfter, Rate: r.rate(), MaxLead: r.maxLead, MaxHeld: r.maxHeld, MeanHandle: r.meanHandler}
}

// Run executes the demo. env supplies the listener's settings (the process
// environment, with demo defaults); DATABASE_URL must name a database.
// It returns an error unless every host ended as expected, every bad message
// was dead-lettered, every message to skip was skipped for its reason (and
// so not dead-lettered), and every partition was committed to its end, in
// the main run and in each run of the comparison.
func Run(ctx context.Context, env func(string) (string, bool), opts Options, out io.Writer, logger *slog.Logger) (Report, error) {
	var report Report
	if opts.Lead < 1 {
		return report, fmt.Errorf("the lead must be at least 1, got %d", opts.Lead)
	}
	ds := platform.NewDataset(opts.Load.Seed, opts.Dataset)
	mock, err := platform.NewServer(ds, platform.ServerOptions{
		Faults: platform.Faults{Latency: opts.VMaaSLatency}, InventoryLatency: platform.Latency{Kind: "fixed", Base: 20 * time.Millisecond},
		Shape: opts.Load.Shape, BulkProfiles: opts.Load.Bulk})
	if err != nil {
		return report, err
	}
	vmaasServed := func() int64 { return mock.Stats().VMaaSCalls }
	mockURL, stopMock, err := platform.Listen(mock)
	if err != nil {
		return report, err
	}
	defer stopMock()

	cfg, _, err := listener.Parse(nil, func(k string) (string, bool) {
		if k == "EMBEDDED_PARTITIONS" {
			return "", false // the demo's broker has embedded.DefaultPartitions
		}
		switch k {
		case "VMAAS_URL", "INVENTORY_URL":
			return mockURL, true
		}
		return env(k)
	}, embedded.Extension())
	if err != nil {
		return report, err
	}
	if !cfg.Embedded {
		return report, fmt.Errorf("the demo runs on its embedded broker; unset KAFKA_BROKERS")
	}
	k := cfg.Kafka
	partitions := embedded.DefaultPartitions
	cluster, err := embedded.Start(partitions, k.Topic)
	if err != nil {
		return report, err
	}
	defer cluster.Close()
	cfg.Brokers, cfg.Kafka.Brokers = cluster.Addrs(), cluster.Addrs()
	k = cfg.Kafka
	fmt.Fprintf(out, "embedded Kafka broker %v, topic %s (%d partitions); platform mock %s (VMaaS %s)\n",
		cfg.Brokers, k.Topic, partitions, mockURL, opts.VMaaSLatency)
	fx := cfg.Domain.Effects
	fxTopics := effects.Topics{Remediations: fx.RemediationsTopic, Notifications: fx.NotificationsTopic, PayloadStatus: fx.PayloadStatusTopic}
	// In production the platform owns these topics; here the demo does.
	if err := effects.CreateTopics(cfg.Brokers, k.Version, fxTopics, int32(partitions), 1); err != nil {
		return report, err
	}

	plan := loadgen.NewPlan(opts.Load)
	_, described, _ := strings.Cut(loadgen.Summary(plan, loadgen.Result{}), "\n") // its first line is about a send not yet made
	fmt.Fprintf(out, "stream of %d messages, produced beside the listener:\n%s", len(plan.Items), described)
	main := stream{name: "main run", topic: k.Topic, dlq: k.DLQTopic, group: k.Group, load: opts.Load, plan: plan,
		perPartition: cfg.Pipeline.InFlightPerPartition, lead: opts.Lead, partitions: partitions, progress: out, every: time.Second, vmaasServed: vmaasServed}
	fmt.Fprintf(out, "listener running: %d partitions, up to %d records in flight per partition, %d in all; "+
		"the producer stays at most %d messages ahead of the group's committed offsets, and what is committed is deleted from the broker\n",
		partitions, cfg.Pipeline.InFlightPerPartition, cfg.Pipeline.InFlightTotal, opts.Lead)
	res, err := runStream(ctx, cfg, ds, main, logger)
	if err != nil {
		return report, err
	}
	report.Main = *measured(res)
	// The main run's listener has stopped, its relay drained: what the
	// topics hold is what its transactions committed.
	fxReport, err := checkEffects(ctx, cfg, fxTopics)
	if err != nil {
		return report, err
	}

	var cmp *comparison
	if opts.CompareEvents > 0 {
		if cmp, err = compare(ctx, cfg, ds, opts, vmaasServed, out, logger); err != nil {
			return report, err
		}
		report.Pipeline, report.Sequential = measured(cmp.pipeline), measured(cmp.sequential)
		if cmp.fixed != nil {
			report.Fixed = measured(*cmp.fixed)
		}
	}

	s := res.stats
	fmt.Fprintf(out, "\nsummary\n")
	fmt.Fprintf(out, "  hosts             %s\n", res.hosts)
	for _, e := range res.hosts.Examples {
		fmt.Fprintf(out, "                      wrong: %s\n", e)
	}
	fmt.Fprintf(out, "  dead letters      %d written, %d bad messages sent\n", res.dead, plan.BadCount())
	fmt.Fprintf(out, "  effects           %s\n", fxReport.Line())
	for _, p := range fxReport.Problems {
		fmt.Fprintf(out, "                      wrong: %s\n", p)
	}
	skipLine, _ := skipSummary(plan, s)
	fmt.Fprintf(out, "  skipped           %s\n", skipLine)
	fmt.Fprintf(out, "  offsets           every partition committed to its end offset (%d records)\n", res.total)
	fmt.Fprintf(out, "  pipeline          %d succeeded, %d skipped, %d dead-lettered, %d retried, %d handled more than once\n",
		s.Succeeded, s.Skipped, s.DeadLettered, s.Retried, finishedRecords(s)-res.total)
	fmt.Fprintf(out, "  produced          %d messages, %.1f MB, in %v, beside the listener\n",
		res.produced.Messages, float64(res.produced.Bytes)/1e6, res.produced.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "  backlog           the producer at most %d messages ahead of the committed offsets (bound %d); the broker held at most %d records of the topic (read every 100 ms)\n",
		res.maxLead, opts.Lead, res.maxHeld)
	fmt.Fprintf(out, "  VMaaS             %d evaluations stored, %d requests served by the mock (the listener's cache: %d answers)\n",
		res.evaluations, res.vmaasServed, cfg.Domain.VMaaSCacheSize)
	fmt.Fprintf(out, "  time              %v to finish every record, %v until the last commit landed\n",
		res.finishedAfter.Round(time.Millisecond), res.committedAfter.Round(time.Millisecond))
	fmt.Fprintf(out, "  throughput        %.0f records/s while the events were produced on the same machine; mean handler time under this load %v (VMaaS %s, PostgreSQL, decoding); concurrency %s\n",
		res.rate(), res.meanHandler.Round(time.Millisecond), opts.VMaaSLatency, cfg.Pipeline.Concurrency)
	if cmp != nil {
		fmt.Fprintf(out, "  comparison        %s\n", cmp.line(cfg, opts))
	}
	if err := res.verify(main); err != nil {
		return report, err
	}
	if len(fxReport.Problems) > 0 {
		return report, fmt.Errorf("effects: %d problems, the first: %s", len(fxReport.Problems), fxReport.Problems[0])
	}
	return report, nil
}

// checkEffects reads the outbox's topics back and judges them against the
// database (proving/effects).
func checkEffects(ctx context.Context, cfg *listener.Config, t effects.Topics) (effects.Report, error) {
	db, err := sql.Open("postgres", cfg.Domain.DatabaseURL)
	if err != nil {
		return effects.Report{}, err
	}
	defer db.Close()
	return effects.Check(ctx, cfg.Brokers, cfg.Kafka.Version, t, db)
}

// finishedRecords counts the records the pipeline finished: handled,
// skipped or dead-lettered.
func finishedRecords(s actors.StatsSnapshot) int64 { return s.Succeeded + s.Skipped + s.DeadLettered }

// skipSummary compares the listener's skip counts with the messages the
// plan sent to be skipped, kind by kind (each kind is named by its reason),
// and describes them, with any other reason the listener gave.
func skipSummary(plan *loadgen.Plan, s actors.StatsSnapshot) (string, bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "%d records, not dead-lettered;", s.Skipped)
	ok := true
	for _, k := range loadgen.SkipKinds {
		got, want := s.SkippedByReason[string(k)], int64(plan.Skipped[k])
		ok = ok && got == want
		fmt.Fprintf(&b, " %s %d of %d sent;", k, got, want)
	}
	for _, r := range slices.Sorted(maps.Keys(s.SkippedByReason)) {
		if !slices.Contains(loadgen.SkipKinds, loadgen.SkipKind(r)) {
			fmt.Fprintf(&b, " %s %d;", r, s.SkippedByReason[r])
		}
	}
	return strings.TrimSuffix(b.String(), ";"), ok
}
