package actors

import (
	"context"
	"fmt"
	"slices"
	"sync"

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

// ChargedBytes is a record's size for the byte budget: the handler's
// RecordBytes, or else its WireBytes. What it is charged is at most the
// whole budget (Settings.Charge).
//
// RecordBytes is the handler's code, and the bridge runs it on sarama's
// ConsumeClaim goroutine, where a panic would end the process: a
// RecordBytes that panics sizes the record at its WireBytes, and the
// handler meets the record again where panics are supervised.
func ChargedBytes(h Handler, r *messages.Record) int64 {
	if s, ok := h.(RecordSizer); ok {
		return sizeOf(s, r)
	}
	return WireBytes(r)
}

func sizeOf(s RecordSizer, r *messages.Record) (n int64) {
	defer func() {
		if recover() != nil {
			n = WireBytes(r)
		}
	}()
	return max(s.RecordBytes(r), 0)
}

// Charge is what r is charged against the byte budget: its size
// (ChargedBytes), at most the whole budget (a record heavier than that runs
// alone); 0 without a budget. A ClaimWorker gives back the sum of the
// charges of the records it releases through PartitionConfig.Release.
func (s Settings) Charge(h Handler, r *messages.Record) int64 {
	if s.InFlightBytes <= 0 {
		return 0
	}
	return min(ChargedBytes(h, r), s.InFlightBytes)
}

// byteBudget is the process-wide budget of bytes in flight
// (Settings.InFlightBytes). Waiters are served first come, first served,
// so a large record waiting for room is not starved by small ones that
// keep fitting in what is left. A record larger than the whole budget is
// charged the whole budget: it runs alone rather than never.
//
// Records waiting for evidence lend their bytes. A record whose failure
// waits for a verdict is judged by what other records meet just after it
// (package blame); while it waits for its retry it holds its charge, and
// without lending, a record charged the whole budget (or a few failing
// records, or one failing record beside a waiter at the head of the queue
// needing more than is left) left no room for any other record of the
// process: no evidence, held for ever, and every partition stopped with it.
// While it waits, what handling it holds is not alive (its attempt ended),
// so the budget admits that much more (at most the budget again): the
// records running never weigh more than twice the budget, and no more than
// it while no record waits for evidence. Its next attempt takes its bytes
// back without waiting (it was admitted): no new record is admitted until
// the budget has room again.
type byteBudget struct {
	size int64

	mu      sync.Mutex
	held    int64 // charged and not given back
	lent    int64 // of held, what records waiting for evidence lend
	waiters []*byteWaiter
}

type byteWaiter struct {
	charge  int64
	ready   chan struct{} // closed when granted
	granted bool
}

func newByteBudget(size int64) *byteBudget {
	return &byteBudget{size: size}
}

// charge is what a record of n bytes takes from the budget.
func (b *byteBudget) charge(n int64) int64 { return min(max(n, 0), b.size) }

// room is what a new charge may take now. b.mu is held.
func (b *byteBudget) room() int64 { return b.size + min(b.lent, b.size) - b.held }

// tryAcquire takes charge(n) if it is free now and nobody waits before it.
func (b *byteBudget) tryAcquire(n int64) bool {
	c := b.charge(n)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) == 0 && c <= b.room() {
		b.held += c
		return true
	}
	return false
}

// acquire takes charge(n), waiting for room; it gives up when ctx is done
// or stop or ended closes (a nil channel never does). What ends the wait:
// records finishing (their bytes come back), a record waiting for evidence
// lending its bytes, or the claim ending.
func (b *byteBudget) acquire(ctx context.Context, n int64, stop, ended <-chan struct{}) bool {
	c := b.charge(n)
	b.mu.Lock()
	if len(b.waiters) == 0 && c <= b.room() {
		b.held += c
		b.mu.Unlock()
		return true
	}
	w := &byteWaiter{charge: c, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
	case <-stop:
	case <-ended:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted {
		// Granted as it gave up: the bytes go to the next waiters.
		b.held -= c
	} else {
		b.waiters = slices.DeleteFunc(b.waiters, func(o *byteWaiter) bool { return o == w })
	}
	b.grant() // a waiter gone from the head may have held back smaller ones
	return false
}

// giveBack returns c bytes charged earlier.
func (b *byteBudget) giveBack(c int64) {
	if c == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= c
	b.grant()
}

// lend adds c bytes (of held) to what records waiting for evidence lend;
// a negative c takes them back, which takes nothing from the records
// admitted meanwhile: no new one is admitted until there is room again.
func (b *byteBudget) lend(c int64) {
	if c == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lent += c
	b.grant()
}

// grant hands room to the waiters in arrival order. b.mu is held.
func (b *byteBudget) grant() {
	for len(b.waiters) > 0 && b.waiters[0].charge <= b.room() {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		w.granted = true
		b.held += w.charge
		close(w.ready)
	}
}

// state returns the bytes held, and of them lent.
func (b *byteBudget) state() (held, lent int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, b.lent
}

// queued returns how many acquirers are waiting.
func (b *byteBudget) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// claimBytes is one claim's book of the bytes its records were charged,
// the byte-budget twin of claimCredits: the bridge charges each record as
// it admits it, the claim's worker gives the charges back as records finish
// or are abandoned (Settings.Charge, summed over the records it releases at
// once), lends and takes back those of records waiting for evidence, and
// close gives back whatever is left when the claim ends, lent bytes taken
// back first. Every byte charged comes back exactly once, and every byte
// lent is taken back exactly once; a release or a loan after close is a
// no-op, a charge after close fails, an over-release (or a release of bytes
// still lent) and an over-loan are errors that change nothing.
type claimBytes struct {
	budget *byteBudget // nil: no byte budget, every call is a no-op

	mu         sync.Mutex
	held, lent int64
	closed     bool
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

// release gives back c bytes: the sum of the charges of the records
// released, none of them lending.
func (cb *claimBytes) release(c int64) error {
	if cb.budget == nil || c <= 0 {
		return nil
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.closed {
		return nil // close gave them back already
	}
	if c > cb.held-cb.lent {
		return fmt.Errorf("byte budget over-release: %d bytes returned, the claim holds %d of which %d are lent", c, cb.held, cb.lent)
	}
	cb.held -= c
	cb.budget.giveBack(c)
	return nil
}

// lend lends c bytes (the charge of a record waiting for evidence) to the
// budget; a negative c takes them back.
func (cb *claimBytes) lend(c int64) error {
	if cb.budget == nil || c == 0 {
		return nil
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.closed {
		return nil // close took them back already
	}
	if cb.lent+c < 0 || cb.lent+c > cb.held {
		return fmt.Errorf("byte budget loan of %d bytes refused: the claim holds %d of which %d are lent", c, cb.held, cb.lent)
	}
	cb.lent += c
	cb.budget.lend(c)
	return nil
}

// close takes back every byte lent, gives back every byte still held and
// makes later releases and loans no-ops; it returns how many it gave back.
func (cb *claimBytes) close() int64 {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.closed || cb.budget == nil {
		cb.closed = true
		return 0
	}
	cb.closed = true
	h := cb.held
	cb.budget.lend(-cb.lent)
	cb.held, cb.lent = 0, 0
	cb.budget.giveBack(h)
	return h
}

// heldNow returns the bytes the claim holds (none once closed).
func (cb *claimBytes) heldNow() int64 {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.held
}

// lentNow returns the bytes the claim lends (none once closed).
func (cb *claimBytes) lentNow() int64 {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.lent
}
