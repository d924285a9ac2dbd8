package consumer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/patchflow/patchflow/actors"
)

// BatchHandler is implemented by a Handler that handles several records in
// one call: a handler writing to a database in bulk, say. Records that are
// ready at once (admitted, let through by Config.Ordering, within the
// in-flight limits) are gathered, up to Config.BatchSize, waiting at most
// Config.BatchLinger after the first, and handed to HandleBatch together.
// So a batch never holds two records of one key under OrderingKey, nor two
// of one partition under OrderingPartition.
//
// HandleBatch returns one outcome per record, in the records' order, each
// read as Handle's error would be (nil, Skip, Permanent, FailedIn, ...):
// one bad record never fails its batchmates, and each is retried,
// dead-lettered or committed by itself. A slice of another length fails
// every record of the batch with an error saying so; a panic fails every
// record as a panic of its own, with HandleBatch's stack; each is then
// retried alone. Each record may Produce its results
// (Record.Produce), produced after the batch for the records it handled.
//
// ctx is done as soon as one record of the batch is cut short (a revoke or
// the drain: its batchmates are retried, their failure not counted as
// their own) and carries the earliest of their attempt deadlines; the
// calls a DependencyReporter reports under it are heard as the
// dependency's, not as any one record's (with WithTracerProvider, as
// children of a span "batch" linked to the records' attempts). Each
// record's attempt lasts until HandleBatch returns, as with Handle: its key
// waits, and it counts in flight. Handle is called for a record when the
// batch has only that one, and for a record whose last batch failed whole
// (a panic, a wrong-length answer), so a bad record is judged by itself.
type BatchHandler interface {
	Handler
	HandleBatch(ctx context.Context, records []*Record) []error
}

// Batches' defaults and ceiling (Config.BatchSize, Config.BatchLinger).
const (
	DefaultBatchSize   = 64
	DefaultBatchLinger = 5 * time.Millisecond
	MaxBatchLinger     = time.Second
)

// batcher gathers the records of concurrent attempts into batches.
type batcher struct {
	h      BatchHandler
	t      *tracing
	size   int
	linger time.Duration
	in     chan *batchItem
	stop   chan struct{}
	done   sync.WaitGroup // the gathering goroutine

	// alone are the records whose last attempt failed with their whole
	// batch (a panic, a wrong-length answer): their next attempt runs by
	// itself through Handle, so one poison record is judged alone and
	// cannot hold its batchmates for ever.
	mu    sync.Mutex
	alone map[recordID]bool
}

// recordID names a record by its place.
type recordID struct {
	topic     string
	partition int32
	offset    int64
}

// maxAlone bounds batcher.alone: records that failed with their batch and
// never came back here (revoked) are forgotten past it.
const maxAlone = 1 << 14

type batchItem struct {
	ctx context.Context
	rec *Record
	out chan batchOutcome // buffered: the batch never waits for its reader
}

// batchOutcome is one record's part of a batch's outcome.
type batchOutcome struct {
	err      error
	alone    bool        // a batch of one: the attempt calls Handle itself
	panicked *batchPanic // HandleBatch panicked: the attempt panics with it
}

// batchPanic is HandleBatch's panic, with where it panicked, for each of
// the batch's attempts to panic with (so each is a handler panic, with the
// batch's stack in its failure).
type batchPanic struct {
	value string
	stack string
}

func (p *batchPanic) String() string {
	return fmt.Sprintf("the batch handler panicked: %s\nin HandleBatch:\n%s", p.value, p.stack)
}

func newBatcher(h BatchHandler, t *tracing, size int, linger time.Duration) *batcher {
	b := &batcher{h: h, t: t, size: size, linger: linger, in: make(chan *batchItem), stop: make(chan struct{}), alone: map[recordID]bool{}}
	b.done.Add(1)
	go b.gather()
	return b
}

// close stops gathering. Attempts in a batch wait for it as they would for
// their own Handle.
func (b *batcher) close() {
	close(b.stop)
	b.done.Wait()
}

// handle runs rec in the next batch and returns its outcome once the
// batch's call returned: the attempt holds its key, its place in flight
// and its drain's grace for as long as the handler holds the record, as a
// Handle of its own would. A record whose last batch failed whole runs
// alone.
func (b *batcher) handle(ctx context.Context, rec *Record) error {
	id := recordID{rec.Topic, rec.Partition, rec.Offset}
	b.mu.Lock()
	alone := b.alone[id]
	delete(b.alone, id)
	b.mu.Unlock()
	if alone {
		return b.h.Handle(ctx, rec)
	}
	it := &batchItem{ctx: ctx, rec: rec, out: make(chan batchOutcome, 1)}
	select {
	case b.in <- it:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.stop:
		return fmt.Errorf("the consumer has stopped: %w", context.Canceled)
	}
	out := <-it.out // the batch's call ends when any of its records' ctx does; a handler ignoring it is held as Handle's would be
	switch {
	case out.alone:
		return b.h.Handle(ctx, rec)
	case out.panicked != nil:
		b.runAlone(id)
		panic(out.panicked)
	}
	return out.err
}

// runAlone makes id's next attempt run by itself.
func (b *batcher) runAlone(id recordID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.alone) >= maxAlone {
		clear(b.alone)
	}
	b.alone[id] = true
}

// gather takes the first waiting record, then others for at most linger,
// up to size, and runs the batch in its own goroutine.
func (b *batcher) gather() {
	defer b.done.Done()
	timer := time.NewTimer(0)
	<-timer.C
	for {
		var batch []*batchItem
		select {
		case it := <-b.in:
			batch = append(batch, it)
		case <-b.stop:
			return
		}
		timer.Reset(b.linger)
	more:
		for len(batch) < b.size {
			select {
			case it := <-b.in:
				batch = append(batch, it)
			case <-timer.C:
				break more
			case <-b.stop:
				break more
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		go b.run(batch)
	}
}

// run calls the handler once for batch and hands each record its outcome.
func (b *batcher) run(batch []*batchItem) {
	live := batch[:0:0]
	for _, it := range batch {
		if it.ctx.Err() != nil {
			it.out <- batchOutcome{err: it.ctx.Err()}
			continue
		}
		live = append(live, it)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		live[0].out <- batchOutcome{alone: true}
		return
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	ctx, end := b.t.batch(ctx, live)
	recs := make([]*Record, len(live))
	for i, it := range live {
		recs[i] = it.rec
	}
	errs, panicked := b.call(ctx, recs)
	end(panicked)
	for i, it := range live {
		switch {
		case panicked != nil:
			it.out <- batchOutcome{panicked: panicked}
		case len(errs) != len(live):
			b.runAlone(recordID{it.rec.Topic, it.rec.Partition, it.rec.Offset})
			it.out <- batchOutcome{err: fmt.Errorf("the batch handler returned %d outcomes for %d records", len(errs), len(live))}
		default:
			it.out <- batchOutcome{err: errs[i]}
		}
	}
}

// call runs HandleBatch, catching its panic with its stack.
func (b *batcher) call(ctx context.Context, recs []*Record) (errs []error, panicked *batchPanic) {
	defer func() {
		if v := recover(); v != nil {
			panicked = &batchPanic{value: actors.PanicValue(v), stack: actors.RecoveredStack()}
		}
	}()
	return b.h.HandleBatch(ctx, recs), nil
}

// batchContext is done as soon as one item's context is (a revoke, a
// drain: the batch's other records are then retried, never counted as
// their own failure), and ends by the earliest item's deadline. It carries
// no record's values: calls reported under it are the dependency's.
func batchContext(items []*batchItem) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var earliest time.Time
	for _, it := range items {
		if d, ok := it.ctx.Deadline(); ok && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	if !earliest.IsZero() {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, earliest)
		prev := cancel
		cancel = func() { cancelDeadline(); prev() }
	}
	stops := make([]func() bool, len(items))
	for i, it := range items {
		stops[i] = context.AfterFunc(it.ctx, cancel)
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// batched is the Handler the adapter calls when records go in batches.
type batched struct{ b *batcher }

func (h batched) Handle(ctx context.Context, r *Record) error { return h.b.handle(ctx, r) }
