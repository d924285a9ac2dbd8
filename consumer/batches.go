package consumer

import (
	"context"
	"fmt"
	"sync"
	"time"
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
// record with its text and stack. Each record may Produce its results
// (Record.Produce), produced after the batch for the records it handled.
//
// ctx is done when every record of the batch was cut short (a revoke or
// the drain), and carries the earliest of their attempt deadlines; the
// calls a DependencyReporter reports under it are heard as the
// dependency's, not as any one record's. Handle is still called for a
// record when the batch has only that one.
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
	size   int
	linger time.Duration
	in     chan *batchItem
	stop   chan struct{}
	done   sync.WaitGroup // the gathering goroutine
}

type batchItem struct {
	ctx  context.Context
	rec  *Record
	errc chan error // buffered: the batch never waits for a waiter gone
}

func newBatcher(h BatchHandler, size int, linger time.Duration) *batcher {
	b := &batcher{h: h, size: size, linger: linger, in: make(chan *batchItem), stop: make(chan struct{})}
	b.done.Add(1)
	go b.gather()
	return b
}

// close stops gathering. A batch running goes on until its handler
// returns (as a handler outliving its drain does); its outcomes go to
// buffered channels nobody may read.
func (b *batcher) close() {
	close(b.stop)
	b.done.Wait()
}

// handle runs rec in the next batch and returns its outcome, or ctx's error
// when the attempt is cut short first.
func (b *batcher) handle(ctx context.Context, rec *Record) error {
	it := &batchItem{ctx: ctx, rec: rec, errc: make(chan error, 1)}
	select {
	case b.in <- it:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.stop:
		return fmt.Errorf("the consumer has stopped: %w", context.Canceled)
	}
	select {
	case err := <-it.errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
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
			it.errc <- it.ctx.Err()
			continue
		}
		live = append(live, it)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	if len(live) == 1 {
		live[0].errc <- b.h.Handle(live[0].ctx, live[0].rec)
		return
	}
	recs := make([]*Record, len(live))
	for i, it := range live {
		recs[i] = it.rec
	}
	errs, panicked := b.call(ctx, recs)
	for i, it := range live {
		switch {
		case panicked != nil:
			it.errc <- panicked
		case len(errs) != len(live):
			it.errc <- fmt.Errorf("the batch handler returned %d outcomes for %d records", len(errs), len(live))
		default:
			it.errc <- errs[i]
		}
	}
}

// call runs HandleBatch, turning a panic into every record's failure.
func (b *batcher) call(ctx context.Context, recs []*Record) (errs []error, panicked error) {
	defer func() {
		if v := recover(); v != nil {
			panicked = fmt.Errorf("the batch handler panicked: %v", v)
		}
	}()
	return b.h.HandleBatch(ctx, recs), nil
}

// batchContext is done once every item's context is done, and ends by the
// earliest item's deadline.
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
	var mu sync.Mutex
	left := len(items)
	stops := make([]func() bool, len(items))
	for i, it := range items {
		stops[i] = context.AfterFunc(it.ctx, func() {
			mu.Lock()
			defer mu.Unlock()
			if left--; left == 0 {
				cancel()
			}
		})
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
