package actors_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ledger"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// newTestSystem returns an actor system whose logs go to the test log at
// Warn and above, shut down when the test ends.
func newTestSystem(t *testing.T) *actor.ActorSystem {
	w := &tWriter{t: t}
	system := actors.NewActorSystem(slog.New(slog.NewTextHandler(w, nil)))
	t.Cleanup(system.Shutdown)
	t.Cleanup(func() { w.done.Store(true) }) // runs first: t.Log after the test panics
	return system
}

// tWriter sends log lines to the test log while the test runs.
type tWriter struct {
	t    *testing.T
	done atomic.Bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// testSettings are fast: short backoff, short drain.
func testSettings(mode ordering.Mode) actors.Settings {
	s := actors.DefaultSettings()
	s.Ordering = mode
	s.BackoffMin = time.Millisecond
	s.BackoffMax = 5 * time.Millisecond
	s.DrainTimeout = 2 * time.Second
	s.MaxAttempts = 3
	s.EvidenceWindow = 200 * time.Millisecond
	s.ConsumerGroup = "test-group"
	return s
}

// call is one Handle invocation seen by scriptedHandler.
type call struct {
	offset  int64
	key     string
	attempt int
}

// scriptedHandler lets a test decide when and how each Handle call returns.
// Each call blocks until the test calls answer for its offset (or the
// context is cancelled). It records concurrency per key and the offsets
// finished successfully, for the checking marker.
type scriptedHandler struct {
	mu         sync.Mutex
	answers    map[int64]chan func(context.Context) error
	attempts   map[int64]int
	runningKey map[string]int
	overlap    []string
	succeeded  map[int64]bool
	calls      chan call
	cancelled  chan int64
	// stash holds calls taken from calls by expectCallOf while it waited
	// for another offset's; expectCall takes them first.
	stash []call
}

func newScriptedHandler() *scriptedHandler {
	return &scriptedHandler{
		answers:    map[int64]chan func(context.Context) error{},
		attempts:   map[int64]int{},
		runningKey: map[string]int{},
		succeeded:  map[int64]bool{},
		calls:      make(chan call, 1024),
		cancelled:  make(chan int64, 1024),
	}
}

func (h *scriptedHandler) answerChan(offset int64) chan func(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, ok := h.answers[offset]
	if !ok {
		ch = make(chan func(context.Context) error, 16)
		h.answers[offset] = ch
	}
	return ch
}

// answer makes the next (or current) Handle call for offset run f and return its result.
func (h *scriptedHandler) answer(offset int64, f func() error) {
	h.answerChan(offset) <- func(context.Context) error { return f() }
}

// answerCtx is answer with the attempt's context, under which the calls f
// reports are booked as the record's.
func (h *scriptedHandler) answerCtx(offset int64, f func(ctx context.Context) error) {
	h.answerChan(offset) <- f
}

func (h *scriptedHandler) Handle(ctx context.Context, r *messages.Record) error {
	key := string(r.GetKey())
	h.mu.Lock()
	h.attempts[r.GetOffset()]++
	attempt := h.attempts[r.GetOffset()]
	if key != "" {
		h.runningKey[key]++
		if h.runningKey[key] > 1 {
			h.overlap = append(h.overlap, fmt.Sprintf("key %s offset %d", key, r.GetOffset()))
		}
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if key != "" {
			h.runningKey[key]--
		}
		h.mu.Unlock()
	}()
	h.calls <- call{offset: r.GetOffset(), key: key, attempt: attempt}
	select {
	case f := <-h.answerChan(r.GetOffset()):
		err := f(ctx)
		if _, skipped := messages.SkipReasonOf(err); err == nil || skipped {
			h.mu.Lock()
			h.succeeded[r.GetOffset()] = true
			h.mu.Unlock()
		}
		return err
	case <-ctx.Done():
		h.cancelled <- r.GetOffset()
		return ctx.Err()
	}
}

func (h *scriptedHandler) isFinished(offset int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.succeeded[offset]
}

func (h *scriptedHandler) overlaps() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.overlap...)
}

func ok() error { return nil }

// expectCall waits for the next Handle call.
func expectCall(t *testing.T, h *scriptedHandler) call {
	t.Helper()
	h.mu.Lock()
	if len(h.stash) > 0 {
		c := h.stash[0]
		h.stash = h.stash[1:]
		h.mu.Unlock()
		return c
	}
	h.mu.Unlock()
	select {
	case c := <-h.calls:
		return c
	case <-time.After(3 * time.Second):
		t.Fatal("no handler call within 3s")
		return call{}
	}
}

// expectCallOf waits for the next Handle call of offset; calls of other
// offsets meanwhile are kept for expectCall.
func expectCallOf(t *testing.T, h *scriptedHandler, offset int64) call {
	t.Helper()
	h.mu.Lock()
	for i, c := range h.stash {
		if c.offset == offset {
			h.stash = slices.Delete(h.stash, i, i+1)
			h.mu.Unlock()
			return c
		}
	}
	h.mu.Unlock()
	deadline := time.After(3 * time.Second)
	for {
		select {
		case c := <-h.calls:
			if c.offset == offset {
				return c
			}
			h.mu.Lock()
			h.stash = append(h.stash, c)
			h.mu.Unlock()
		case <-deadline:
			t.Fatalf("no handler call of offset %d within 3s", offset)
			return call{}
		}
	}
}

// waitFailed waits until the actor has taken the failure of attempt of
// offset, the record pinning the watermark.
func (f *partitionFixture) waitFailed(t *testing.T, offset int64, attempt int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the failure of offset %d attempt %d", offset, attempt), func() bool {
		s := f.actor.State()
		return s.PinnedOffset == offset && s.PinnedFailure.GetAttempt() >= int32(attempt)
	})
}

// failUntilDeadLettered answers each attempt of offset with fail and, once
// the actor has taken the failure, has three other records served as the
// evidence that it was the record's own, until the record's dead letter is
// written (at most 3 × MaxAttempts attempts: a record retries at its
// backoff while its verdicts ripen). It returns the next free offset and
// the attempts made.
func (f *partitionFixture) failUntilDeadLettered(t *testing.T, offset, next int64, dependency string, maxAttempts int,
	fail func() error, written func(int64) bool) (int64, int) {
	t.Helper()
	for attempt := 1; attempt <= 3*maxAttempts; attempt++ {
		if c := expectCallOf(t, f.handler, offset); c.attempt != attempt {
			t.Fatalf("attempt %d of offset %d, want %d", c.attempt, offset, attempt)
		}
		f.handler.answer(offset, fail)
		waitFor(t, fmt.Sprintf("the failure of offset %d attempt %d", offset, attempt), func() bool {
			s := f.actor.State()
			return written(offset) || (s.PinnedOffset == offset && s.PinnedFailure.GetAttempt() >= int32(attempt)) || s.PinnedOffset != offset
		})
		if written(offset) {
			return next, attempt
		}
		next = f.othersServed(t, next, 3, dependency)
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			if written(offset) {
				return next, attempt
			}
			if f.handler.hasCall(offset) {
				break // retried before its verdicts were ripe: fail that attempt too
			}
			time.Sleep(time.Millisecond)
		}
	}
	t.Fatalf("offset %d not dead-lettered within %d attempts", offset, 3*maxAttempts)
	return next, 0
}

// hasCall reports whether a call of offset waits to be taken.
func (h *scriptedHandler) hasCall(offset int64) bool {
	h.mu.Lock()
	for _, c := range h.stash {
		if c.offset == offset {
			h.mu.Unlock()
			return true
		}
	}
	h.mu.Unlock()
	select {
	case c := <-h.calls:
		h.mu.Lock()
		h.stash = append(h.stash, c)
		h.mu.Unlock()
		return c.offset == offset
	default:
		return false
	}
}

// othersServed admits n records from offset on, each of a key of its own,
// and has each succeed after a served call to dependency (none when empty)
// reported under its context: evidence that a failure just before was the
// failing record's own. It returns the next free offset.
func (f *partitionFixture) othersServed(t *testing.T, offset int64, n int, dependency string) int64 {
	t.Helper()
	for i := range n {
		off := offset + int64(i)
		f.admit(off, fmt.Sprintf("other-%d", off))
		expectCallOf(t, f.handler, off)
		f.handler.answerCtx(off, func(ctx context.Context) error {
			if dependency != "" {
				f.deps.Observe(ctx, dependency, time.Millisecond, true)
			}
			return nil
		})
		waitFor(t, "another record to finish", func() bool { return f.handler.isFinished(off) })
	}
	return offset + int64(n)
}

// mark is one MarkOffset call.
type mark struct {
	partition int32
	offset    int64
}

// checkingMarker records marks and fails the test on a mark that passes an
// unfinished offset or moves backwards.
type checkingMarker struct {
	t        *testing.T
	finished func(offset int64) bool
	admitted func() []int64
	mu       sync.Mutex
	last     int64
	latest   string    // the metadata of the last mark or reset
	marks    chan mark // marks that move the offset past the claim's first record
}

func newCheckingMarker(t *testing.T, finished func(int64) bool, admitted func() []int64) *checkingMarker {
	return &checkingMarker{t: t, finished: finished, admitted: admitted, last: -1, marks: make(chan mark, 1024)}
}

func (m *checkingMarker) MarkOffset(_ string, partition int32, offset int64, metadata string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if offset <= m.last {
		m.t.Errorf("mark moved backwards or repeated: %d after %d", offset, m.last)
	}
	for _, o := range m.admitted() {
		if o < offset && !m.finished(o) {
			m.t.Errorf("mark %d passes unfinished offset %d", offset, o)
		}
	}
	m.checkMetadata(offset, metadata)
	first := m.last < 0
	m.last = offset
	m.latest = metadata
	if first && offset == slices.Min(m.admitted()) {
		return // the claim's first commit, at its first record: metadata, not an advance
	}
	m.marks <- mark{partition: partition, offset: offset}
}

// ResetOffset replaces the metadata of the last mark; it must never move
// the offset.
func (m *checkingMarker) ResetOffset(_ string, _ int32, offset int64, metadata string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if offset != m.last {
		m.t.Errorf("metadata reset at %d, the last mark is %d", offset, m.last)
	}
	m.checkMetadata(offset, metadata)
	m.latest = metadata
}

// committed returns the offset last marked; -1 before the first mark.
func (m *checkingMarker) committed() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// expectFinishedAbove waits until the latest commit metadata calls each of
// offsets finished.
func (m *checkingMarker) expectFinishedAbove(t *testing.T, offsets ...int64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		m.mu.Lock()
		meta := m.latest
		m.mu.Unlock()
		r, err := ledger.DecodeMetadata(meta)
		missing := err != nil
		for _, o := range offsets {
			missing = missing || !r.Finished(o)
		}
		if !missing {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("commit metadata %q does not call %v finished", meta, offsets)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkMetadata fails the test when the metadata committed with offset
// calls finished an admitted offset that is not.
func (m *checkingMarker) checkMetadata(offset int64, metadata string) {
	if metadata == "" {
		return
	}
	r, err := ledger.DecodeMetadata(metadata)
	if err != nil {
		m.t.Errorf("commit metadata %q: %v", metadata, err)
		return
	}
	if r.Base != offset {
		m.t.Errorf("commit metadata %q committed with offset %d", metadata, offset)
	}
	for _, o := range m.admitted() {
		if r.Finished(o) && !m.finished(o) {
			m.t.Errorf("commit metadata %q calls unfinished offset %d finished", metadata, o)
		}
	}
}

// ignoresMetadata gives a test marker that watches offsets alone the
// ResetOffset of actors.OffsetMarker.
type ignoresMetadata struct{}

func (ignoresMetadata) ResetOffset(string, int32, int64, string) {}

func (m *checkingMarker) expectMark(t *testing.T, want int64) {
	t.Helper()
	select {
	case got := <-m.marks:
		if got.offset != want {
			t.Fatalf("mark = %d, want %d", got.offset, want)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("no mark within 3s, want %d", want)
	}
}

func (m *checkingMarker) expectNoMark(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case got := <-m.marks:
		t.Fatalf("unexpected mark %d", got.offset)
	case <-time.After(d):
	}
}

// scriptedDeadLetters fails its first failures writes, then succeeds; each
// write waits for the test to allow it when gate is set.
type scriptedDeadLetters struct {
	mu       sync.Mutex
	failures int
	writes   int
	written  map[int64]*messages.DeadLetter
	gate     chan struct{}
	seen     chan *messages.DeadLetter
}

func newScriptedDeadLetters(failures int, gated bool) *scriptedDeadLetters {
	d := &scriptedDeadLetters{failures: failures, written: map[int64]*messages.DeadLetter{}, seen: make(chan *messages.DeadLetter, 64)}
	if gated {
		d.gate = make(chan struct{})
	}
	return d
}

func (d *scriptedDeadLetters) Write(ctx context.Context, l *messages.DeadLetter) error {
	d.seen <- l
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writes++
	if d.writes <= d.failures {
		return fmt.Errorf("broker unavailable (write %d)", d.writes)
	}
	d.written[l.GetOriginalOffset()] = l
	return nil
}

func (d *scriptedDeadLetters) isWritten(offset int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.written[offset] != nil
}

// partitionFixture runs one PartitionActor with a scripted handler, a
// scripted dead-letter writer and a checking marker.
type partitionFixture struct {
	system   *actor.ActorSystem
	handler  *scriptedHandler
	dlq      *scriptedDeadLetters
	marker   *checkingMarker
	stats    *actors.Stats
	actor    *actors.PartitionActor
	pid      *actor.PID
	epoch    int64
	deps     *actors.Dependencies
	logs     *logLines
	released atomic.Int64 // credits the actor gave back
	mu       sync.Mutex
	admitted []int64
}

func newPartitionFixture(t *testing.T, settings actors.Settings, dlq *scriptedDeadLetters) *partitionFixture {
	t.Helper()
	if dlq == nil {
		dlq = newScriptedDeadLetters(0, false)
	}
	f := newPartitionFixtureFull(t, settings, dlq, dlq.isWritten)
	f.dlq = dlq
	return f
}

// newPartitionFixtureFull runs the actor with any dead-letter writer;
// dlqWritten says which offsets it acknowledged, for the checking marker.
func newPartitionFixtureFull(t *testing.T, settings actors.Settings, dlq actors.DeadLetterWriter, dlqWritten func(int64) bool) *partitionFixture {
	t.Helper()
	h := newScriptedHandler()
	f := buildPartitionFixture(t, settings, h, h.isFinished, dlq, dlqWritten)
	f.handler = h
	return f
}

// newPartitionFixtureHandler runs the actor with handler h, whose successes
// the checking marker cannot see: use it only where nothing may be marked.
func newPartitionFixtureHandler(t *testing.T, settings actors.Settings, h actors.Handler) *partitionFixture {
	t.Helper()
	dlq := newScriptedDeadLetters(0, false)
	return buildPartitionFixture(t, settings, h, func(int64) bool { return false }, dlq, dlq.isWritten)
}

func buildPartitionFixture(t *testing.T, settings actors.Settings, h actors.Handler, handled func(int64) bool,
	dlq actors.DeadLetterWriter, dlqWritten func(int64) bool) *partitionFixture {
	t.Helper()
	f := &partitionFixture{system: newTestSystem(t), stats: &actors.Stats{}, epoch: 7, deps: actors.NewDependencies(settings.BlameConfig()), logs: &logLines{}}
	finished := func(o int64) bool { return handled(o) || dlqWritten(o) }
	f.marker = newCheckingMarker(t, finished, f.admittedOffsets)
	f.actor = actors.NewPartitionActor(actors.PartitionConfig{
		Topic: "events", Partition: 3, Epoch: f.epoch, Settings: settings,
		Handler: h, DeadLetters: dlq, Marker: f.marker, Stats: f.stats,
		Dependencies: f.deps, Logger: slog.New(f.logs), Release: func(n int, _ int64) { f.released.Add(int64(n)) },
	})
	f.pid = f.system.Root.Spawn(f.actor.Props())
	t.Cleanup(func() {
		_ = f.system.Root.StopFuture(f.pid).Wait()
	})
	return f
}

// ackedDeadLetters remembers the offsets its writer acknowledged.
type ackedDeadLetters struct {
	inner actors.DeadLetterWriter
	acked sync.Map // offset -> true
}

func (a *ackedDeadLetters) Write(ctx context.Context, l *messages.DeadLetter) error {
	if err := a.inner.Write(ctx, l); err != nil {
		return err
	}
	a.acked.Store(l.GetOriginalOffset(), true)
	return nil
}

func (a *ackedDeadLetters) isAcked(offset int64) bool {
	_, ok := a.acked.Load(offset)
	return ok
}

func (f *partitionFixture) admittedOffsets() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.admitted...)
}

func (f *partitionFixture) admit(offset int64, key string) {
	f.mu.Lock()
	f.admitted = append(f.admitted, offset)
	f.mu.Unlock()
	var k []byte
	if key != "" {
		k = []byte(key)
	}
	f.system.Root.Send(f.pid, &messages.RecordAdmitted{Record: &messages.Record{
		Topic: "events", Partition: 3, Offset: offset, Key: k, Value: []byte(fmt.Sprintf("value-%d", offset)),
	}})
}

// logLines collects log records by message, for tests of what is logged.
type logLines struct {
	mu    sync.Mutex
	lines []string
	warns []string // the messages at level warn or above
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.lines = append(l.lines, r.Message)
	if r.Level >= slog.LevelWarn {
		l.warns = append(l.warns, r.Message)
	}
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

// warned returns how many records were logged at warn level or above with
// a message starting with prefix.
func (l *logLines) warned(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.warns {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// count returns how many records were logged with msg.
func (l *logLines) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.lines {
		if m == msg {
			n++
		}
	}
	return n
}
