package clients

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// AnswerBudget bounds the memory of the answers a process's clients are
// reading and decoding at once: a byte budget shared by its VMaaS and
// inventory clients (VMaaSOptions.Answers, InventoryOptions.Answers). Each
// successful answer is charged what reading and decoding it can hold, as
// bounded from its size before it is read and from its content once it is
// (answerShape), and gives it back once decoded. Safe for concurrent use.
//
// It is a budget of its own, not the records' (the pipeline's
// InFlightBytes): a record holds its bytes while it waits for its answers,
// so answers charged to the same budget could wait for each other's
// records for ever.
//
// Waits are served first come, first served (semaphore.Weighted), so a
// large answer waiting for room is not starved by small ones that keep
// fitting. An answer needing more than the whole budget is charged the
// whole budget: it is read alone rather than never. So the answers being
// read and decoded hold at most the larger of the budget and one answer's
// bound (maxAnswerBytes).
//
// Nothing waits for room while holding some: a call waits only before its
// answer is read, holding nothing of the budget; an answer that turns out
// to need more than it holds takes the rest only if it is free now, and
// otherwise gives everything back and fails its attempt as congestion
// (messages.Congested), learning how much to wait for in the next attempt.
// So two readers can never each hold half of the budget waiting for the
// other's half.
type AnswerBudget struct {
	sem       *semaphore.Weighted
	size      int64
	inUse     atomic.Int64
	peak      atomic.Int64
	congested atomic.Uint64
}

// NewAnswerBudget returns a budget of size bytes to share between the
// clients of a process. It returns nil, no bound, for a size of 0 or less.
func NewAnswerBudget(size int64) *AnswerBudget {
	if size <= 0 {
		return nil
	}
	return &AnswerBudget{sem: semaphore.NewWeighted(size), size: size}
}

// AnswerBudgetStats is a snapshot of an AnswerBudget. The fields are read
// one by one, so under load they may be a few answers apart.
type AnswerBudgetStats struct {
	Size  int64 // the budget
	InUse int64 // charged to the answers being read and decoded now
	Peak  int64 // the most InUse has been
	// Congested counts the attempts that failed for want of room: their
	// wait ended with the attempt, or their answer needed more than it was
	// charged while the rest was taken.
	Congested uint64
}

// Stats returns b's figures; all zero for a nil budget.
func (b *AnswerBudget) Stats() AnswerBudgetStats {
	if b == nil {
		return AnswerBudgetStats{}
	}
	return AnswerBudgetStats{Size: b.size, InUse: b.inUse.Load(), Peak: b.peak.Load(), Congested: b.congested.Load()}
}

// charge is what n bytes take from the budget: n, or the whole budget.
func (b *AnswerBudget) charge(n int64) int64 { return min(max(n, 0), b.size) }

// took books c bytes just taken from the semaphore.
func (b *AnswerBudget) took(c int64) {
	now := b.inUse.Add(c)
	for {
		p := b.peak.Load()
		if now <= p || b.peak.CompareAndSwap(p, now) {
			return
		}
	}
}

// giveBack returns c bytes taken earlier.
func (b *AnswerBudget) giveBack(c int64) {
	if c == 0 {
		return
	}
	b.inUse.Add(-c)
	b.sem.Release(c)
}

// reservation is what one answer holds of a budget. It belongs to one call
// at a time (no locking); every byte it takes goes back exactly once,
// through shrink or release. A reservation of a nil budget holds nothing
// and every call succeeds.
type reservation struct {
	budget *AnswerBudget
	held   int64
}

// reserve takes n bytes of b (charge: the whole budget at most), waiting
// for room first come, first served. What ends the wait: the answers ahead
// of it giving back enough (release, shrink), or ctx ending, the attempt's
// deadline or the caller's context, in which case it holds nothing and
// returns ctx's error. The caller holds nothing of b while it waits.
func reserve(ctx context.Context, b *AnswerBudget, n int64) (*reservation, error) {
	r := &reservation{budget: b}
	if b == nil {
		return r, nil
	}
	c := b.charge(n)
	if err := b.sem.Acquire(ctx, c); err != nil {
		return r, err
	}
	b.took(c)
	r.held = c
	return r, nil
}

// grow makes r cover n bytes, taking what it lacks only if that is free
// now: it never waits, since it holds bytes others may be waiting for. It
// reports whether r covers n; a reservation holding the whole budget
// covers anything (the answer is read alone).
func (r *reservation) grow(n int64) bool {
	if r.budget == nil {
		return true
	}
	c := r.budget.charge(n)
	if c <= r.held {
		return true
	}
	if !r.budget.sem.TryAcquire(c - r.held) {
		return false
	}
	r.budget.took(c - r.held)
	r.held = c
	return true
}

// covers reports whether r holds enough for n bytes.
func (r *reservation) covers(n int64) bool {
	return r.budget == nil || r.budget.charge(n) <= r.held
}

// shrink gives back what r holds beyond n bytes.
func (r *reservation) shrink(n int64) {
	if r.budget == nil {
		return
	}
	if c := r.budget.charge(n); c < r.held {
		r.budget.giveBack(r.held - c)
		r.held = c
	}
}

// release gives back all r holds; releasing again does nothing.
func (r *reservation) release() {
	if r.budget == nil {
		return
	}
	r.budget.giveBack(r.held)
	r.held = 0
}

// maxAnswerBytes bounds what one answer may hold while it is read and
// decoded (answerShape.need): an answer that would take more is refused as
// too large, the service's failure, before it is decoded. It is the
// default answer budget (the listener's ANSWERS_MB), so with the defaults
// one answer never holds more than the whole budget.
const maxAnswerBytes = 64 << 20

// answerShape is what reading and decoding a client's answers holds, as a
// bound in bytes: before the body is read, from its size (anticipate);
// once it is, from its content (need). TestAnswerNeedBoundsTheLiveSet
// measures the live set of realistic and of the most compact hostile
// answers and holds need above it.
type answerShape struct {
	// maxBody bounds a successful body on the wire, after gzip decoding.
	maxBody int64
	// perByte is what a body byte is expected to hold, read and decoded,
	// for the answers the service gives: need/len of a realistic answer,
	// rounded up. It sizes the reservation made before reading.
	perByte int64
	// perValue bounds what one object or null of the body holds decoded:
	// the Go value it becomes, with the slack of the slice or map that
	// holds it and any copy kept of it (the VMaaS cache's).
	perValue int64
	// perQuote bounds what a string holds beyond its bytes (a string
	// header in a slice, with its slack and copy), per quote character.
	perQuote int64
}

// guessBytes is the body size reserved for before reading one whose length
// the transport does not know (chunked, or gzip decoded on the fly), when
// no earlier attempt of the call learned better: the realistic answer of a
// 400-package host is about 93 KB.
const guessBytes = 128 << 10

// anticipate is what a body of n bytes is expected to hold: the
// reservation made before reading it, and kept while it is read.
func (s answerShape) anticipate(n int64) int64 {
	return min(s.perByte*max(n, 1), max(maxAnswerBytes, n))
}

// need bounds what body, read into a buffer of capacity bytes, holds once
// decoded: the buffer; the strings copied out of it, at most twice the
// body's bytes (allocation rounding, chunks' tails) and two more for each
// byte at or above 0x80 (an invalid UTF-8 byte becomes the three of
// U+FFFD); perValue for each '{' and null, perQuote for each '"'. Counting
// characters, those inside strings included, only over-counts.
func (s answerShape) need(body []byte, capacity int) int64 {
	values := int64(bytes.Count(body, openBrace) + bytes.Count(body, jsonNull))
	quotes := int64(bytes.Count(body, quote))
	return int64(capacity) + 2*int64(len(body)) + 2*highBytes(body) + s.perValue*values + s.perQuote*quotes
}

var (
	openBrace = []byte{'{'}
	quote     = []byte{'"'}
	jsonNull  = []byte("null")
)

// highBytes counts the bytes of b at or above 0x80.
func highBytes(b []byte) int64 {
	n := 0
	for len(b) >= 8 {
		n += bits.OnesCount64(binary.LittleEndian.Uint64(b) & 0x8080808080808080)
		b = b[8:]
	}
	for _, c := range b {
		if c >= 0x80 {
			n++
		}
	}
	return int64(n)
}

// errNoRoom reports an answer that needed more of the budget than it held
// while the rest was taken: the attempt fails as congestion, and the next
// one waits for learned bytes before reading.
type errNoRoom struct {
	learned int64
	err     error
}

func (e *errNoRoom) Error() string { return e.err.Error() }
func (e *errNoRoom) Unwrap() error { return e.err }

// readAnswer reads a successful body of announced length size (-1:
// unknown) under res, which covers shape.anticipate of what it expects,
// and leaves res covering exactly what the body holds decoded (shape.need).
// It reuses buf when res covers its capacity.
//
// Errors, after which res holds nothing: errTooLarge for a body over
// shape.maxBody or one whose need passes maxAnswerBytes; *errNoRoom when
// the body needs more than res holds and the budget has not the rest free
// now; a read error otherwise.
func readAnswer(r io.Reader, size int64, buf []byte, res *reservation, shape answerShape) (_ []byte, err error) {
	defer func() {
		if err != nil {
			res.release()
		}
	}()
	limit := shape.maxBody
	if size > limit {
		return nil, tooLarge(limit)
	}
	b := buf[:0]
	if cap(b) == 0 || !res.covers(shape.anticipate(int64(cap(b)))) || (size >= 0 && int64(cap(b)) <= size) {
		first := int64(512)
		if size >= 0 {
			first = size + 1 // +1: the end is seen without growing
		}
		if !res.grow(shape.anticipate(first)) {
			return nil, &errNoRoom{learned: shape.anticipate(first), err: fmt.Errorf("no room in the answer budget for a buffer of %d bytes", first)}
		}
		b = make([]byte, 0, first)
	}
	lr := io.LimitedReader{R: r, N: limit + 1}
	for {
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(b) < cap(b) {
			continue
		}
		if int64(len(b)) > limit {
			return nil, tooLarge(limit)
		}
		// The next buffer, and the old one while it is copied: both are
		// covered before the new one exists.
		next := min(max(2*int64(cap(b)), 512), limit+1)
		if !res.grow(shape.anticipate(next)) {
			// Learn the body's length without keeping it, for the next
			// attempt to wait for; the budget is given back meanwhile.
			read := int64(len(b))
			b = nil
			res.release()
			rest, err := io.Copy(io.Discard, &lr)
			learned := shape.anticipate(2 * next)
			if err == nil {
				if read+rest > limit {
					return nil, tooLarge(limit)
				}
				learned = shape.anticipate(read + rest + 1)
			}
			return nil, &errNoRoom{learned: learned, err: fmt.Errorf("no room in the answer budget to read past %d bytes", read)}
		}
		nb := make([]byte, len(b), next)
		copy(nb, b)
		b = nb
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(limit)
	}
	need := shape.need(b, cap(b))
	if need > maxAnswerBytes {
		return nil, fmt.Errorf("%w: decoding its %d bytes would take about %d, over the %d one answer may", errTooLarge, len(b), need, maxAnswerBytes)
	}
	if !res.grow(need) {
		return nil, &errNoRoom{learned: need, err: fmt.Errorf("no room in the answer budget to decode %d bytes (about %d decoded)", len(b), need)}
	}
	res.shrink(need)
	return b, nil
}

// tooLarge is errTooLarge for a body over limit bytes.
func tooLarge(limit int64) error { return fmt.Errorf("%w: over %d bytes", errTooLarge, limit) }

// isNoRoom reports whether err is readAnswer's *errNoRoom, and what it
// learned.
func isNoRoom(err error) (int64, bool) {
	var e *errNoRoom
	if errors.As(err, &e) {
		return e.learned, true
	}
	return 0, false
}

// congestedAttempt counts an attempt that failed for want of room.
func (b *AnswerBudget) congestedAttempt() {
	if b != nil {
		b.congested.Add(1)
	}
}
