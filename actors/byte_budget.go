package actors

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/patchflow/patchflow/messages"
)

// RecordSizer is implemented by a Handler that knows how much memory
// handling a record takes: the record decoded, what its calls send and the
// answers they read, as an upper bound in bytes. The bridge reserves that
// much of Settings.InFlightBytes before it admits the record and gives it
// back when the record finishes, so the memory of the records in flight is
// bounded by bytes, whatever their mix of sizes, and not only by count.
//
// RecordBytes must be cheap and a pure function of the record: the bridge
// and the partition actor each call it, and what one reserves the other
// gives back. A handler without it is charged the record's wire size
// (WireBytes), which undercounts whatever its decoding adds.
type RecordSizer interface {
	RecordBytes(record *messages.Record) int64
}

// WireBytes is a record's size as fetched: key, value and headers, each
// header counted with HeaderOverhead, what it costs in memory beyond its
// bytes (300,000 empty headers in one 600 KB record take tens of MiB).
func WireBytes(r *messages.Record) int64 {
	n := int64(len(r.GetKey()) + len(r.GetValue()))
	for _, h := range r.GetHeaders() {
		n += HeaderOverhead + int64(len(h.GetKey())+len(h.GetValue()))
	}
	return n
}

// HeaderOverhead is what one header costs in memory beyond its key and
// value: sarama's *RecordHeader and the pipeline's *messages.Header, with
// their slice headers and allocation rounding.
const HeaderOverhead = 160

// ChargedBytes is what a record is charged against the byte budget: the
// handler's RecordBytes, or else its WireBytes. A ClaimWorker gives it back
// through PartitionConfig.Release.
func ChargedBytes(h Handler, r *messages.Record) int64 {
	if s, ok := h.(RecordSizer); ok {
		return max(s.RecordBytes(r), 0)
	}
	return WireBytes(r)
}

// byteBudget is the process-wide budget of bytes in flight
// (Settings.InFlightBytes). Waiters are served first come, first served
// (semaphore.Weighted), so a large record waiting for room is not starved
// by small ones that keep fitting in what is left. A record larger than the
// whole budget is charged the whole budget: it runs alone rather than
// never.
type byteBudget struct {
	sem   *semaphore.Weighted
	size  int64
	inUse atomic.Int64
}

func newByteBudget(size int64) *byteBudget {
	return &byteBudget{sem: semaphore.NewWeighted(size), size: size}
}

// charge is what a record of n bytes takes from the budget.
func (b *byteBudget) charge(n int64) int64 { return min(max(n, 0), b.size) }

// tryAcquire takes charge(n) if it is free now and nobody waits before it.
func (b *byteBudget) tryAcquire(n int64) bool {
	c := b.charge(n)
	if !b.sem.TryAcquire(c) {
		return false
	}
	b.inUse.Add(c)
	return true
}

// acquire takes charge(n), waiting for room; it gives up when ctx is done
// or stop or ended closes (a nil channel never does). What ends the wait:
// records finishing (their bytes come back), or the claim ending.
func (b *byteBudget) acquire(ctx context.Context, n int64, stop, ended <-chan struct{}) bool {
	if b.tryAcquire(n) {
		return true
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := make(chan struct{})
	defer close(watch)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ended:
			cancel()
		case <-watch:
		}
	}()
	c := b.charge(n)
	if b.sem.Acquire(wctx, c) != nil {
		return false
	}
	b.inUse.Add(c)
	return true
}

// giveBack returns c bytes charged earlier.
func (b *byteBudget) giveBack(c int64) {
	if c == 0 {
		return
	}
	b.inUse.Add(-c)
	b.sem.Release(c)
}

// claimBytes is one claim's book of the bytes its records were charged,
// the byte-budget twin of claimCredits: the bridge charges each record as
// it admits it, the claim's worker gives the bytes back as records finish
// or are abandoned, and close gives back whatever is left when the claim
// ends. Every byte charged comes back exactly once; a release after close
// is a no-op, a charge after close fails, an over-release is an error.
//
// The worker gives back by record sizes (RecordBytes), summed over the
// records it releases at once; the book converts a sum to its charge. That
// is exact: records held together each fit the budget and so sum to at
// most it, and a record larger than the budget is held alone.
type claimBytes struct {
	budget *byteBudget // nil: no byte budget, every call is a no-op

	mu     sync.Mutex
	held   int64
	closed bool
}

func newClaimBytes(budget *byteBudget) *claimBytes { return &claimBytes{budget: budget} }

// tryAcquire charges a record of n bytes if the budget has room now.
func (cb *claimBytes) tryAcquire(n int64) bool {
	if cb.budget == nil {
		return true
	}
	if !cb.budget.tryAcquire(n) {
		return false
	}
	return cb.book(cb.budget.charge(n))
}

// acquire charges a record of n bytes, waiting for room (byteBudget.acquire
// names what ends the wait).
func (cb *claimBytes) acquire(ctx context.Context, n int64, stop, ended <-chan struct{}) bool {
	if cb.budget == nil {
		return true
	}
	if !cb.budget.acquire(ctx, n, stop, ended) {
		return false
	}
	return cb.book(cb.budget.charge(n))
}

// book enters c bytes just charged, unless the claim has closed: then they
// go straight back and the charge fails.
func (cb *claimBytes) book(c int64) bool {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.closed {
		cb.budget.giveBack(c)
		return false
	}
	cb.held += c
	return true
}

// release gives back the charge of records whose sizes sum to n bytes.
func (cb *claimBytes) release(n int64) error {
	if cb.budget == nil || n <= 0 {
		return nil
	}
	c := cb.budget.charge(n)
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.closed {
		return nil // close gave them back already
	}
	if c > cb.held {
		return fmt.Errorf("byte budget over-release: %d bytes returned, the claim holds %d", c, cb.held)
	}
	cb.held -= c
	cb.budget.giveBack(c)
	return nil
}

// close gives back every byte still held and makes later releases no-ops;
// it returns how many.
func (cb *claimBytes) close() int64 {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.closed || cb.budget == nil {
		cb.closed = true
		return 0
	}
	cb.closed = true
	h := cb.held
	cb.held = 0
	cb.budget.giveBack(h)
	return h
}

// heldNow returns the bytes the claim holds (none once closed).
func (cb *claimBytes) heldNow() int64 {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.held
}
