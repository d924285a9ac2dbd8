package actors_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// shapeWorld runs partition actors that share one Dependencies, each fed as
// the bridge feeds its claim (S credits, the span and its evidence
// overdraft), on a topic a test describes, through a handler the test
// writes. It is where the retry rule's shapes are tried: few records, one
// partition, partition order, a record at the head of a full span.
type shapeWorld struct {
	t        *testing.T
	system   *actor.ActorSystem
	settings actors.Settings
	deps     *actors.Dependencies
	stats    *actors.Stats
	logs     *logLines
	handle   shapeHandler
	parts    []*shapePartition
	stop     chan struct{}
	stopped  sync.Once
	wg       sync.WaitGroup
	started  time.Time

	mu       sync.Mutex
	dead     map[shapeKey]*messages.DeadLetter
	deadAt   map[shapeKey]time.Time
	done     map[shapeKey]bool
	attempts map[shapeKey]int
}

// shapeHandler is a test's handler: w to report calls through.
type shapeHandler func(w *shapeWorld, ctx context.Context, r *messages.Record) error

type shapeKey struct {
	partition int32
	offset    int64
}

type shapePartition struct {
	w       *shapeWorld
	p       int32
	pa      *actors.PartitionActor
	pid     *actor.PID
	span    *actors.Span
	credits chan struct{}
	// keys gives the key of the record at an offset; false past the end.
	keys     func(offset int64) (string, bool)
	marked   atomic.Int64
	admitted atomic.Int64 // the highest offset admitted
	// ahead is the most offsets a record was admitted past the watermark.
	ahead atomic.Int64
}

// newShapeWorld starts partitions partitions, the i-th holding the records
// keys(i, offset) says, handled by handle.
func newShapeWorld(t *testing.T, s actors.Settings, partitions int, keys func(p int32, offset int64) (string, bool), handle shapeHandler) *shapeWorld {
	t.Helper()
	w := &shapeWorld{t: t, system: newTestSystem(t), settings: s, deps: actors.NewDependencies(s.BlameConfig()), stats: &actors.Stats{},
		logs: &logLines{}, handle: handle, stop: make(chan struct{}), started: time.Now(),
		dead: map[shapeKey]*messages.DeadLetter{}, deadAt: map[shapeKey]time.Time{}, done: map[shapeKey]bool{}, attempts: map[shapeKey]int{}}
	for i := range partitions {
		p := int32(i)
		sp := &shapePartition{w: w, p: p, span: actors.NewSpan(s.Span()), credits: make(chan struct{}, s.InFlightPerPartition),
			keys: func(off int64) (string, bool) { return keys(p, off) }}
		sp.marked.Store(-1)
		sp.admitted.Store(-1)
		sp.pa = actors.NewPartitionActor(actors.PartitionConfig{
			Topic: "events", Partition: p, Epoch: int64(i + 1), Settings: s, Span: sp.span,
			Handler: actors.HandlerFunc(w.run), DeadLetters: actors.DeadLetterFunc(w.deadLetter),
			Marker: sp, Stats: w.stats, Dependencies: w.deps, Logger: slog.New(w.logs),
			Release: func(n int, _ int64) {
				for range n {
					<-sp.credits
				}
			},
		})
		sp.pid = w.system.Root.Spawn(sp.pa.Props())
		w.parts = append(w.parts, sp)
	}
	for _, sp := range w.parts {
		w.wg.Go(sp.feed)
	}
	t.Cleanup(w.close)
	return w
}

func (w *shapeWorld) close() {
	w.stopped.Do(func() { close(w.stop) })
	w.wg.Wait()
	for _, sp := range w.parts {
		_ = w.system.Root.StopFuture(sp.pid).Wait()
	}
}

// feed admits the partition's records in order while it holds a credit and
// the span (with its overdraft) lets it, as the bridge does.
func (sp *shapePartition) feed() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-sp.w.stop
		cancel()
	}()
	last := int64(-1)
	for off := int64(0); ; off++ {
		key, ok := sp.keys(off)
		if !ok {
			return
		}
		select {
		case sp.credits <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if off == 0 {
			sp.span.Advance(0)
		}
		if !actors.SpanWait(sp.span, ctx, off, last) {
			return
		}
		last = off
		sp.admitted.Store(off)
		if wm := sp.span.Watermark(); off-wm > sp.ahead.Load() {
			sp.ahead.Store(off - wm)
		}
		sp.w.system.Root.Send(sp.pid, &messages.RecordAdmitted{Record: &messages.Record{Topic: "events", Partition: sp.p, Offset: off,
			Key: []byte(key), Value: []byte(fmt.Sprintf("value %d/%d", sp.p, off))}})
	}
}

func (sp *shapePartition) MarkOffset(_ string, _ int32, offset int64, _ string) {
	if offset < sp.marked.Load() {
		sp.w.t.Errorf("partition %d marked %d after %d", sp.p, offset, sp.marked.Load())
	}
	sp.marked.Store(offset)
}

func (sp *shapePartition) ResetOffset(string, int32, int64, string) {}

func (w *shapeWorld) run(ctx context.Context, r *messages.Record) error {
	k := shapeKey{r.GetPartition(), r.GetOffset()}
	w.mu.Lock()
	w.attempts[k]++
	w.mu.Unlock()
	err := w.handle(w, ctx, r)
	if _, skipped := messages.SkipReasonOf(err); err == nil || skipped {
		w.mu.Lock()
		w.done[k] = true
		w.mu.Unlock()
	}
	return err
}

func (w *shapeWorld) deadLetter(_ context.Context, l *messages.DeadLetter) error {
	k := shapeKey{l.GetOriginalPartition(), l.GetOriginalOffset()}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead[k] = l
	w.deadAt[k] = time.Now()
	return nil
}

// call reports one call to dependency under ctx (the record's), which took
// no time: served or not; it returns the error a handler would for a
// failed call.
func (w *shapeWorld) call(ctx context.Context, dependency string, served bool) error {
	w.deps.Observe(ctx, dependency, 0, served)
	if served {
		return nil
	}
	return messages.FailedIn(dependency, messages.Transient(fmt.Errorf("%s: 503 Service Unavailable", dependency)))
}

// check runs a health check of dependency every period until the world
// stops: passing while up says so.
func (w *shapeWorld) check(dependency string, period time.Duration, up func() bool) {
	w.wg.Go(func() {
		for {
			start := time.Now()
			w.deps.Probe(dependency, start, up())
			select {
			case <-w.stop:
				return
			case <-time.After(period):
			}
		}
	})
}

// deadLettered returns when offset of partition p was dead-lettered; zero
// when it was not.
func (w *shapeWorld) deadLettered(p int32, offset int64) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deadAt[shapeKey{p, offset}]
}

// deadCount returns how many records were dead-lettered.
func (w *shapeWorld) deadCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.dead)
}

// deadOf returns the dead letter of offset of partition p; nil when none.
func (w *shapeWorld) deadOf(p int32, offset int64) *messages.DeadLetter {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dead[shapeKey{p, offset}]
}

// isDone reports whether offset of partition p was handled (done or skipped).
func (w *shapeWorld) isDone(p int32, offset int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done[shapeKey{p, offset}]
}

// attemptsOf returns how many times offset of partition p was handled.
func (w *shapeWorld) attemptsOf(p int32, offset int64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.attempts[shapeKey{p, offset}]
}

// waitDead waits until offset of partition p is dead-lettered, within bound
// from the start of the world; it fails the test otherwise.
func (w *shapeWorld) waitDead(p int32, offset int64, bound time.Duration) {
	w.t.Helper()
	deadline := w.started.Add(bound)
	for w.deadLettered(p, offset).IsZero() {
		if time.Now().After(deadline) {
			st := w.stats.Snapshot()
			w.t.Fatalf("offset %d of partition %d not dead-lettered within %v: %d attempts; own %d, shared %d, held %d verdicts; evidence lent %d",
				offset, p, bound, w.attemptsOf(p, offset), st.RetriedOwn, st.RetriedShared, st.RetriedHeld, st.EvidenceLent)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitCommitted waits until partition p committed offset (everything
// before it finished).
func (w *shapeWorld) waitCommitted(p int32, offset int64, within time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(within)
	for w.parts[p].marked.Load() < offset {
		if time.Now().After(deadline) {
			w.t.Fatalf("partition %d committed %d, not %d, within %v (dead letters %d)", p, w.parts[p].marked.Load(), offset, within, w.deadCount())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// shapeSettings are the rule at test speed: a window of 150 ms, attempts
// ending at 60 ms, backoff 5 to 20 ms.
func shapeSettings(mode ordering.Mode) actors.Settings {
	s := actors.DefaultSettings()
	s.Ordering = mode
	s.MaxAttempts = 3
	s.AttemptTimeout = 60 * time.Millisecond
	s.BackoffMin, s.BackoffMax = 5*time.Millisecond, 20*time.Millisecond
	s.EvidenceWindow = 150 * time.Millisecond
	s.DrainTimeout = time.Second
	s.InFlightPerPartition = 4
	s.SpanPerPartition = 16
	s.ConsumerGroup = "test-group"
	return s
}
