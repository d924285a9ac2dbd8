package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/proving/checker"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/offsets"
	"github.com/patchflow/patchflow/proving/platform"
)

// stream is one run of the listener over a stream of events on a topic,
// consumer group and hosts of its own.
type stream struct {
	name         string // in progress lines and errors
	topic, dlq   string
	group        string
	partitions   int // of topic
	load         loadgen.Options
	plan         *loadgen.Plan
	perPartition int // LISTENER_INFLIGHT_PER_PARTITION of this run
	// fixed runs with LISTENER_CONCURRENCY=fixed whatever the base says.
	fixed bool
	// upFront: every message is produced before the listener starts, so
	// the run measures the listener alone; the plan must fit in lead.
	// Otherwise the producer runs beside the listener, paced by lead.
	upFront bool
	// lead: the producer hands a message to Kafka only while fewer than
	// lead messages are above the group's committed offsets.
	lead     int
	progress io.Writer     // progress lines; nil: none
	every    time.Duration // between progress lines
	// vmaasServed counts the VMaaS requests the platform mock has served.
	vmaasServed func() int64
}

// streamResult is what a run measured and checked.
type streamResult struct {
	total          int64 // messages on the topic
	produced       loadgen.Result
	finishedAfter  time.Duration // from the first record admitted to every record finished
	committedAfter time.Duration // ... to every partition committed to its end
	stats          actors.StatsSnapshot
	meanHandler    time.Duration
	hosts          checker.Report
	dead           int64 // records on the dead-letter topic
	maxLead        int64 // the producer's largest lead over the committed offsets
	maxHeld        int64 // the most records the broker held for the topic, read before each trim
	evaluations    int64 // evaluations the handler stored
	vmaasServed    int64 // VMaaS requests the mock served meanwhile (the rest came from the cache)
}

// rate is the run's records per second, first admission to last finish.
func (r streamResult) rate() float64 { return float64(r.total) / r.finishedAfter.Seconds() }

// verify returns an error unless every host ended as expected, every bad
// message was dead-lettered, and every message to skip was skipped for its
// reason.
func (r streamResult) verify(s stream) error {
	_, skipsOK := skipSummary(s.plan, r.stats)
	switch {
	case !r.hosts.OK():
		return fmt.Errorf("%s: %d hosts missing and %d wrong", s.name, r.hosts.Missing, r.hosts.Wrong)
	case r.dead != int64(s.plan.BadCount()):
		return fmt.Errorf("%s: %d dead letters for %d bad messages", s.name, r.dead, s.plan.BadCount())
	case !skipsOK:
		return fmt.Errorf("%s: skipped records by reason %v, for %v messages to skip", s.name, r.stats.SkippedByReason, s.plan.Skipped)
	}
	return nil
}

// runStream produces s's plan, runs the listener (base's settings, with
// s's topic, group and records in flight per partition, and a handler of
// its own: its own database pool and VMaaS cache) until every partition
// is committed to its end, deletes what the group committed from the
// broker as it goes, and checks every host of the plan in the database.
func runStream(ctx context.Context, base *listener.Config, ds *platform.Dataset, s stream, logger *slog.Logger) (streamResult, error) {
	var res streamResult
	ctx, cancel := context.WithCancel(ctx) // ends the producer on every return
	defer cancel()
	cfg := *base
	cfg.Kafka.Topic, cfg.Kafka.DLQTopic, cfg.Kafka.Group = s.topic, s.dlq, s.group
	cfg.Pipeline.ConsumerGroup = s.group
	cfg.Pipeline.InFlightPerPartition = s.perPartition
	if s.fixed {
		cfg.Pipeline.Concurrency = actors.ConcurrencyFixed
	}
	k := cfg.Kafka
	res.total = int64(len(s.plan.Items))
	if s.upFront && len(s.plan.Items) > s.lead {
		return res, fmt.Errorf("%s: %d messages produced up front exceed the lead of %d", s.name, len(s.plan.Items), s.lead)
	}

	trim, err := newTrimmer(k.Brokers, k.Version, s.topic, s.group, int32(s.partitions))
	if err != nil {
		return res, fmt.Errorf("%s: %w", s.name, err)
	}
	defer trim.close()
	stopTrim := trim.run(100 * time.Millisecond)
	defer stopTrim()
	gate := &leadGate{limit: int64(s.lead), committed: trim.committed.Load}

	type production struct {
		res loadgen.Result
		err error
	}
	produced := make(chan production, 1)
	produce := func(wait func(context.Context, int) error) {
		r, err := loadgen.Produce(ctx, ds, s.load, s.plan,
			loadgen.ProduceOptions{Brokers: k.Brokers, Topic: s.topic, Version: k.Version, Compression: "lz4", Wait: wait})
		produced <- production{r, err}
	}
	productionDone := false
	if s.upFront {
		produce(gate.count) // counted, never held: the plan fits in the lead
		p := <-produced
		if p.err != nil {
			return res, fmt.Errorf("%s: produce: %w", s.name, p.err)
		}
		res.produced, productionDone = p.res, true
	}

	domain, err := listener.NewDomain(ctx, &cfg, logger)
	if err != nil {
		return res, err
	}
	defer domain.Close() // the outbox relay publishes what waits, then stops
	if err := domain.StartEffects(k, logger); err != nil {
		return res, err
	}
	timed := &listener.TimedHandler{Inner: domain.Handler}
	servedBefore := s.vmaasServed()
	run, err := listener.Start(ctx, &cfg, timed, logger)
	if err != nil {
		return res, err
	}
	defer run.Stop()
	if !s.upFront {
		go produce(gate.wait)
	}

	stats := run.Bridge.Stats()
	var began time.Time
	var prev int64
	lastLine := time.Now()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = run.Stop()
			return res, ctx.Err()
		case <-run.Exited():
			return res, fmt.Errorf("%s: listener stopped early: %v", s.name, run.Err())
		case p := <-produced:
			if p.err != nil {
				_ = run.Stop()
				return res, fmt.Errorf("%s: produce: %w", s.name, p.err)
			}
			res.produced, productionDone = p.res, true
			continue
		case <-poll.C:
		}
		snap := stats.Snapshot()
		if began.IsZero() {
			if snap.Admitted == 0 {
				continue
			}
			began = time.Now()
		}
		finished := finishedRecords(snap)
		if res.finishedAfter == 0 && finished >= res.total {
			res.finishedAfter = time.Since(began)
		}
		if now := time.Now(); s.progress != nil && now.Sub(lastLine) >= s.every {
			fmt.Fprintf(s.progress, "  %5.0fs  %6d/%d finished  %5.0f records/s  produced %6d  in flight %4d  lag %6d  skipped %d  dead-lettered %d  retried %d\n",
				now.Sub(began).Seconds(), finished, res.total, float64(finished-prev)/now.Sub(lastLine).Seconds(), gate.sent.Load(), snap.InFlight,
				max(0, gate.sent.Load()-finished), snap.Skipped, snap.DeadLettered, snap.Retried)
			prev, lastLine = finished, now
		}
		if res.finishedAfter == 0 || !productionDone {
			continue
		}
		if p, err := offsets.Read(k.Brokers, k.Topic, k.Group); err != nil || !p.AtEnd() || p.Total() != res.total {
			continue // the last commit lands within the commit interval
		}
		break
	}
	res.committedAfter = time.Since(began)
	if err := run.Stop(); err != nil {
		return res, err
	}
	stopTrim()
	res.stats = stats.Snapshot()
	res.meanHandler, _ = timed.Mean()
	res.maxLead, res.maxHeld = gate.maxLead.Load(), trim.maxHeld.Load()
	res.evaluations, res.vmaasServed = domain.Evaluator.Stats().Evaluations.Load(), s.vmaasServed()-servedBefore
	if res.hosts, err = checker.Check(ctx, domain.Store.DB(), ds, s.load.Shape, s.plan.Expected, 8); err != nil {
		return res, err
	}
	dlq, err := offsets.Read(k.Brokers, s.dlq, "")
	if err != nil {
		return res, err
	}
	res.dead = dlq.Total()
	return res, nil
}

// leadGate keeps a producer at most limit messages ahead of a consumer
// group: the message at plan index i (messages 0..i-1 sent) may go only
// while i - committed() < limit, so that once it is sent, sent - committed
// <= limit. committed is the number of records below the group's committed
// offsets as last read; it only grows, so the lead the gate sees is never
// below the true one.
type leadGate struct {
	limit     int64
	committed func() int64
	sent      atomic.Int64 // messages handed to the producer
	maxLead   atomic.Int64 // the largest sent - committed seen right after a send
}

// wait blocks until the message at plan index i may be sent, or ctx ends.
func (g *leadGate) wait(ctx context.Context, i int) error {
	for int64(i)-g.committed() >= g.limit {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return g.count(ctx, i)
}

// count records that the message at plan index i is sent, without waiting.
func (g *leadGate) count(_ context.Context, i int) error {
	sent := int64(i) + 1
	g.sent.Store(sent)
	lead := sent - g.committed()
	for {
		m := g.maxLead.Load()
		if lead <= m || g.maxLead.CompareAndSwap(m, lead) {
			return nil
		}
	}
}

// trimmer reads a group's committed offsets on a topic and deletes the
// records below them from the broker (DeleteRecords), so an in-process
// broker holds only what the group has not committed.
type trimmer struct {
	client sarama.Client
	admin  sarama.ClusterAdmin
	topic  string
	group  string
	parts  []int32

	deleted   map[int32]int64 // the log start offset set per partition
	committed atomic.Int64    // records below the committed offsets, all partitions
	maxHeld   atomic.Int64    // the most records the broker held (end offset - log start offset, summed), read before a trim

	stopOnce sync.Once
}

// segmentBytes is the segment size of the demo's topics: the broker frees
// deleted records a segment at a time.
const segmentBytes = 1 << 20

func newTrimmer(brokers []string, version sarama.KafkaVersion, topic, group string, partitions int32) (*trimmer, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "patchflow-demo-trimmer"
	cfg.Version = version
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, err
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		_ = admin.Close()
		return nil, fmt.Errorf("create topic %s: %w", topic, err)
	}
	// Deleting records frees the broker's memory only a whole segment at a
	// time; kfake's default segment holds 100 MiB per partition.
	segment := strconv.Itoa(segmentBytes)
	err = admin.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
		"segment.bytes": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &segment}}, false)
	if err != nil {
		_ = admin.Close()
		return nil, fmt.Errorf("topic %s: set segment.bytes: %w", topic, err)
	}
	if err := client.RefreshMetadata(topic); err != nil {
		_ = admin.Close()
		return nil, err
	}
	parts, err := client.Partitions(topic)
	if err != nil {
		_ = admin.Close()
		return nil, err
	}
	return &trimmer{client: client, admin: admin, topic: topic, group: group, parts: parts, deleted: map[int32]int64{}}, nil
}

// run trims every interval in the background until the returned stop is
// called (more than once is fine); stop returns once the last trim is done.
func (t *trimmer) run(interval time.Duration) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_ = t.trim() // a failed read or delete is tried again at the next tick
			}
		}
	}()
	return func() {
		t.stopOnce.Do(func() { close(done) })
		<-exited
	}
}

// trim reads what the broker holds for the topic and the group's
// committed offsets, and deletes the records below them.
func (t *trimmer) trim() error {
	var held int64
	for _, p := range t.parts {
		end, err := t.client.GetOffset(t.topic, p, sarama.OffsetNewest)
		if err != nil {
			return err
		}
		start, err := t.client.GetOffset(t.topic, p, sarama.OffsetOldest)
		if err != nil {
			return err
		}
		held += end - start
	}
	if held > t.maxHeld.Load() {
		t.maxHeld.Store(held)
	}
	res, err := t.admin.ListConsumerGroupOffsets(t.group, map[string][]int32{t.topic: t.parts})
	if err != nil {
		return err
	}
	var committed int64
	del := map[int32]int64{}
	for p, b := range res.Blocks[t.topic] {
		if b.Err != sarama.ErrNoError {
			return b.Err
		}
		off := max(b.Offset, 0)
		committed += off
		if off > t.deleted[p] {
			del[p] = off
		}
	}
	if committed > t.committed.Load() {
		t.committed.Store(committed)
	}
	if len(del) == 0 {
		return nil
	}
	if err := t.admin.DeleteRecords(t.topic, del); err != nil {
		return err
	}
	for p, off := range del {
		t.deleted[p] = off
	}
	return nil
}

func (t *trimmer) close() { _ = t.admin.Close() }
