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
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/cmd/internal/checker"
	"github.com/patchflow/patchflow/cmd/internal/listener"
	"github.com/patchflow/patchflow/cmd/internal/loadgen"
	"github.com/patchflow/patchflow/cmd/internal/offsets"
	"github.com/patchflow/patchflow/cmd/internal/platform"
	"github.com/patchflow/patchflow/messages"
)

// Options choose the demo's size and the platform's behaviour.
type Options struct {
	Load         loadgen.Options
	Dataset      platform.DatasetSize
	VMaaSLatency string // platform.ParseLatency form
}

// DefaultOptions: 20,000 realistic events, VMaaS at a long-tailed 100 ms,
// 0.5% bad messages and 0.5% messages the listener skips on top.
func DefaultOptions() Options {
	o := loadgen.DefaultOptions()
	o.BadShare, o.SkipShare = 0.005, 0.005
	return Options{Load: o, Dataset: platform.DefaultSize(), VMaaSLatency: "longtail:100ms"}
}

// Run executes the demo. env supplies the listener's settings (the process
// environment, with demo defaults); DATABASE_URL must name a database.
// It returns an error unless every host ended as expected, every bad message
// was dead-lettered, every message to skip was skipped for its reason (and
// so not dead-lettered), and every partition was committed to its end.
func Run(ctx context.Context, env func(string) (string, bool), opts Options, out io.Writer, logger *slog.Logger) error {
	ds := platform.NewDataset(opts.Load.Seed, opts.Dataset)
	mock, err := platform.NewServer(ds, platform.ServerOptions{
		Faults: platform.Faults{Latency: opts.VMaaSLatency}, InventoryLatency: platform.Latency{Kind: "fixed", Base: 20 * time.Millisecond},
		Shape: opts.Load.Shape, BulkProfiles: opts.Load.Bulk})
	if err != nil {
		return err
	}
	mockURL, stopMock, err := platform.Listen(mock)
	if err != nil {
		return err
	}
	defer stopMock()

	cfg, _, err := listener.Parse(nil, func(k string) (string, bool) {
		switch k {
		case "VMAAS_URL", "INVENTORY_URL":
			return mockURL, true
		}
		return env(k)
	})
	if err != nil {
		return err
	}
	if !cfg.Embedded {
		return fmt.Errorf("the demo runs on its embedded broker; unset KAFKA_BROKERS")
	}
	k := cfg.Kafka
	cluster, err := listener.StartEmbedded(k.Topic, k.DLQTopic, cfg.EmbeddedPartitions)
	if err != nil {
		return err
	}
	defer cluster.Close()
	cfg.Brokers, cfg.Kafka.Brokers = cluster.ListenAddrs(), cluster.ListenAddrs()
	k = cfg.Kafka
	fmt.Fprintf(out, "embedded Kafka broker %v, topic %s (%d partitions); platform mock %s (VMaaS %s)\n",
		cfg.Brokers, k.Topic, cfg.EmbeddedPartitions, mockURL, opts.VMaaSLatency)

	plan := loadgen.NewPlan(opts.Load)
	res, err := loadgen.Produce(ctx, ds, opts.Load, plan, loadgen.ProduceOptions{Brokers: k.Brokers, Topic: k.Topic, Version: k.Version, Compression: "lz4", Progress: out})
	if err != nil {
		return err
	}
	fmt.Fprint(out, loadgen.Summary(plan, res))

	domain, err := listener.NewDomain(ctx, cfg, logger, nil)
	if err != nil {
		return err
	}
	defer domain.Close()
	timed := &listener.TimedHandler{Inner: domain.Handler}

	// The old design's speed, measured: the same handler, one event at a
	// time, on events of hosts the main stream does not touch.
	sequential, err := measureSequential(ctx, ds, opts.Load, domain.Handler)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sequential baseline: %v per event, one at a time (%d events of other hosts)\n", sequential.Round(time.Millisecond), sequentialSample)

	run, err := listener.Start(ctx, cfg, timed, logger)
	if err != nil {
		return err
	}
	defer run.Stop()
	bridge := run.Bridge
	start, err := offsets.Read(k.Brokers, k.Topic, "")
	if err != nil {
		return err
	}
	total := start.Total()
	stats := bridge.Stats()
	for stats.Snapshot().Admitted == 0 {
		time.Sleep(time.Millisecond)
	}
	began := time.Now()
	fmt.Fprintf(out, "listener running: %d partitions, up to %d records in flight per partition, %d in all\n",
		cfg.EmbeddedPartitions, cfg.Pipeline.InFlightPerPartition, cfg.Pipeline.InFlightTotal)
	var finishedAfter time.Duration
	var prev int64
	lastLine := began
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = run.Stop()
			return ctx.Err()
		case <-run.Exited():
			return fmt.Errorf("listener stopped early: %v", run.Err())
		case <-poll.C:
		}
		s := stats.Snapshot()
		finished := finishedRecords(s)
		if finishedAfter == 0 && finished >= total {
			finishedAfter = time.Since(began)
		}
		if now := time.Now(); now.Sub(lastLine) >= time.Second {
			fmt.Fprintf(out, "  %5.0fs  %6d/%d finished  %5.0f records/s  in flight %4d  lag %6d  skipped %d  dead-lettered %d  retried %d\n",
				now.Sub(began).Seconds(), finished, total, float64(finished-prev)/now.Sub(lastLine).Seconds(), s.InFlight,
				total-finished, s.Skipped, s.DeadLettered, s.Retried)
			prev, lastLine = finished, now
		}
		if finishedAfter == 0 {
			continue
		}
		if p, err := offsets.Read(k.Brokers, k.Topic, k.Group); err != nil || !p.AtEnd() {
			continue // the last commit lands within the auto-commit interval
		}
		break
	}
	committedAfter := time.Since(began)
	if err := run.Stop(); err != nil {
		return err
	}
	s := stats.Snapshot()

	fmt.Fprintf(out, "\nchecking every host against the last event sent for it...\n")
	rep, err := checker.Check(ctx, domain.Store.DB(), ds, opts.Load.Shape, plan.Expected, 8)
	if err != nil {
		return err
	}
	dlq, err := offsets.Read(k.Brokers, k.DLQTopic, "")
	if err != nil {
		return err
	}
	dead := dlq.Total()

	meanLatency, _ := timed.Mean()
	rate := float64(total) / finishedAfter.Seconds()
	sequentialRate := float64(cfg.EmbeddedPartitions) / sequential.Seconds()
	fmt.Fprintf(out, "\nsummary\n")
	fmt.Fprintf(out, "  hosts             %s\n", rep)
	for _, e := range rep.Examples {
		fmt.Fprintf(out, "                      wrong: %s\n", e)
	}
	fmt.Fprintf(out, "  dead letters      %d written, %d bad messages sent\n", dead, plan.BadCount())
	skipLine, skipsOK := skipSummary(plan, s)
	fmt.Fprintf(out, "  skipped           %s\n", skipLine)
	fmt.Fprintf(out, "  offsets           every partition committed to its end offset (%d records)\n", total)
	fmt.Fprintf(out, "  pipeline          %d succeeded, %d skipped, %d dead-lettered, %d retried, %d handled more than once\n",
		s.Succeeded, s.Skipped, s.DeadLettered, s.Retried, finishedRecords(s)-total)
	fmt.Fprintf(out, "  time              %v to finish every record, %v until the last commit landed\n",
		finishedAfter.Round(time.Millisecond), committedAfter.Round(time.Millisecond))
	fmt.Fprintf(out, "  throughput        %.0f records/s; mean handler time under this load %v (VMaaS %s, PostgreSQL, decoding)\n", rate, meanLatency.Round(time.Millisecond), opts.VMaaSLatency)
	fmt.Fprintf(out, "  sequential        %.1f records/s for one record at a time per partition (%d partitions / %v measured alone): %.1fx faster\n",
		sequentialRate, cfg.EmbeddedPartitions, sequential.Round(time.Millisecond), rate/sequentialRate)

	switch {
	case !rep.OK():
		return fmt.Errorf("%d hosts missing and %d wrong", rep.Missing, rep.Wrong)
	case dead != int64(plan.BadCount()):
		return fmt.Errorf("%d dead letters for %d bad messages", dead, plan.BadCount())
	case !skipsOK:
		return fmt.Errorf("skipped records by reason %v, for %v messages to skip", s.SkippedByReason, plan.Skipped)
	}
	return nil
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

// sequentialSample is how many events the sequential baseline handles.
const sequentialSample = 40

// measureSequential handles sequentialSample created and updated events of
// hosts outside the main stream, one at a time, and returns the mean time.
func measureSequential(ctx context.Context, ds *platform.Dataset, o loadgen.Options, h actors.Handler) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < sequentialSample; i++ {
		spec := platform.EventSpec{Type: "created", HostID: platform.HostID(o.Seed^0x5e9, i/2), OrgID: "org-baseline",
			Timestamp: o.Start.Add(time.Duration(i) * time.Millisecond), Bulk: o.Bulk}
		if i%2 == 1 {
			spec.Type, spec.Revision = "updated", 1
		}
		body, err := ds.Event(spec, o.Shape)
		if err != nil {
			return 0, err
		}
		if err := h.Handle(ctx, &messages.Record{Key: []byte(spec.HostID), Value: body}); err != nil {
			return 0, fmt.Errorf("sequential baseline: %w", err)
		}
	}
	return time.Since(start) / sequentialSample, nil
}
