package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// comparison is the pipeline and the sequential design measured on the
// same stream, in turn.
type comparison struct {
	events     int // good events per stream
	hosts      int
	messages   int // per stream, bad and skipped ones included
	pipeline   streamResult
	sequential streamResult
	// fixed is the pipeline with its limit fixed at G, measured when the
	// base configuration's limit is adaptive (nil otherwise).
	fixed        *streamResult
	perPartition int // the pipeline's records in flight per partition
}

// Seeds of the comparison's streams: hosts (and bad and skipped hosts,
// seeded from these) of their own, apart from each other and from the
// main stream's (compareSeedsDisjoint in the tests checks it).
const (
	pipelineSeedOffset   = 0x1000
	sequentialSeedOffset = 0x2000
	fixedSeedOffset      = 0x3000
)

// compareLoads returns the comparison's two streams' options: the main
// stream's shape, shares and hosts per event, CompareEvents good events,
// each stream with hosts of its own.
func compareLoads(opts Options) (pipeline, sequential loadgen.Options) {
	o := opts.Load
	o.Events = opts.CompareEvents
	o.Hosts = max(1, opts.CompareEvents*opts.Load.Hosts/max(1, opts.Load.Events))
	pipeline, sequential = o, o
	pipeline.Seed += pipelineSeedOffset
	sequential.Seed += sequentialSeedOffset
	return pipeline, sequential
}

// fixedLoad is the stream of the pipeline with a fixed limit: the
// pipeline's, with hosts of its own.
func fixedLoad(opts Options) loadgen.Options {
	o, _ := compareLoads(opts)
	o.Seed += fixedSeedOffset - pipelineSeedOffset
	return o
}

// compare measures the pipeline (base's settings) and then the sequential
// design (one record in flight per partition, otherwise the same) on
// streams of the same size and shape, each produced up front to a topic
// and consumer group of its own, each with a handler of its own (its own
// database pool and a cold VMaaS cache), against the same broker, platform
// mock and database. Both runs are checked like the main one.
func compare(ctx context.Context, base *listener.Config, ds *platform.Dataset, opts Options, vmaasServed func() int64, out io.Writer, logger *slog.Logger) (*comparison, error) {
	pl, sl := compareLoads(opts)
	c := &comparison{events: opts.CompareEvents, hosts: pl.Hosts, perPartition: base.Pipeline.InFlightPerPartition}
	k := base.Kafka
	streams := []stream{
		{name: "comparison, pipeline", topic: k.Topic + ".compare-pipeline", group: k.Group + "-compare-pipeline",
			load: pl, plan: loadgen.NewPlan(pl), perPartition: base.Pipeline.InFlightPerPartition},
		{name: "comparison, sequential", topic: k.Topic + ".compare-sequential", group: k.Group + "-compare-sequential",
			load: sl, plan: loadgen.NewPlan(sl), perPartition: 1},
	}
	results := []*streamResult{&c.pipeline, &c.sequential}
	if base.Pipeline.Concurrency == actors.ConcurrencyAdaptive {
		fl := fixedLoad(opts)
		c.fixed = &streamResult{}
		streams = append(streams, stream{name: "comparison, fixed limit", topic: k.Topic + ".compare-fixed", group: k.Group + "-compare-fixed",
			load: fl, plan: loadgen.NewPlan(fl), perPartition: base.Pipeline.InFlightPerPartition, fixed: true})
		results = append(results, c.fixed)
	}
	c.messages = len(streams[0].plan.Items)
	fmt.Fprintf(out, "\ncomparing the designs on %d messages each (%d events of %d hosts, the main stream's shape and shares of bad messages and messages to skip), produced up front, in turn:\n",
		c.messages, c.events, c.hosts)
	for i, s := range streams {
		s.dlq, s.upFront, s.lead, s.vmaasServed, s.partitions = s.topic+".dlq", true, opts.Lead, vmaasServed, embedded.DefaultPartitions
		res, err := runStream(ctx, base, ds, s, logger)
		if err != nil {
			return nil, err
		}
		if err := res.verify(s); err != nil {
			return nil, err
		}
		*results[i] = res
		limit := fmt.Sprintf("in all up to %d, %s", base.Pipeline.InFlightTotal, base.Pipeline.Concurrency)
		if s.fixed {
			limit = fmt.Sprintf("in all %d, fixed", base.Pipeline.InFlightTotal)
		}
		fmt.Fprintf(out, "  %-24s in flight per partition %d (%s): %d records in %v, %.1f records/s, mean handler time %v, %d VMaaS requests for %d evaluations stored; %s\n",
			s.name, s.perPartition, limit, res.total, res.finishedAfter.Round(1e6), res.rate(), res.meanHandler.Round(1e6), res.vmaasServed, res.evaluations, res.hosts)
	}
	return c, nil
}

// line is the summary's comparison line: what was compared and how, and
// the ratio.
func (c *comparison) line(base *listener.Config, opts Options) string {
	shape, profile := opts.Load.Shape, "only what the listener reads"
	if opts.Load.Bulk {
		profile = "whole profiles"
	}
	return fmt.Sprintf("%d messages each (%d events of %d hosts, %d packages and %d repositories per profile, %s), in turn on the same broker, PostgreSQL and platform mock "+
		"(VMaaS %s, cache %d, cold for each), produced up front, from the first record admitted to the last finished: "+
		"the pipeline (%d in flight per partition, %d in all, %s) %.1f records/s, mean handler time %v%s; one record at a time per partition %.1f records/s: %s",
		c.messages, c.events, c.hosts, shape.Packages, shape.Repos, profile, opts.VMaaSLatency, base.Domain.VMaaSCacheSize,
		c.perPartition, base.Pipeline.InFlightTotal, base.Pipeline.Concurrency, c.pipeline.rate(), c.pipeline.meanHandler.Round(time.Millisecond), c.fixedWords(base),
		c.sequential.rate(), ratioWords(c.pipeline.rate(), c.sequential.rate()))
}

// fixedWords describes the fixed-limit run beside the adaptive one ("" when
// there is none).
func (c *comparison) fixedWords(base *listener.Config) string {
	if c.fixed == nil {
		return ""
	}
	return fmt.Sprintf("; with the limit fixed at %d, %.1f records/s, mean handler time %v", base.Pipeline.InFlightTotal, c.fixed.rate(), c.fixed.meanHandler.Round(time.Millisecond))
}

// ratioWords says how the pipeline's rate compares with the sequential
// design's: "N.Nx faster" at or above 1.05, "N.Nx slower" (the inverse
// ratio) at or below 1/1.05, "as fast (within 5%)" between.
func ratioWords(pipeline, sequential float64) string {
	switch r := pipeline / sequential; {
	case r >= 1.05:
		return fmt.Sprintf("the pipeline %.1fx faster", r)
	case r <= 1/1.05:
		return fmt.Sprintf("the pipeline %.1fx slower", 1/r)
	default:
		return fmt.Sprintf("the pipeline as fast, within 5%% (ratio %.2f)", r)
	}
}
