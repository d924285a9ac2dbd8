package actors

import (
	"context"
	"sync/atomic"
)

// Span bounds how far past its watermark a claim admits records: the bridge
// admits offset o only while o < watermark + limit. The claim's worker
// publishes its watermark with Advance; the bridge waits on it. One record
// that pins the watermark therefore stops admission limit offsets later
// (the partition is span-blocked) instead of letting everything after it
// finish uncommitted: that bounds what a lost commit metadata would replay,
// and how long the partition runs ahead of what it has committed.
//
// The bridge's view is never ahead of the worker's: Advance publishes a
// watermark the worker has reached, and watermarks only move forward, so a
// stale view only makes the bridge wait longer. Safe for concurrent use.
//
// A record that pins the watermark and keeps failing while nothing else of
// its partition runs gets a bounded overdraft (Overdraft): a few offsets
// past the span, so that records of other keys run as evidence of whether
// its dependency serves (package blame). It lasts as long as that
// watermark does.
type Span struct {
	limit     int64
	watermark atomic.Int64 // -1 until the first Advance
	extra     atomic.Pointer[overdraft]
	moved     chan struct{}
}

// overdraft is how many offsets past the span may be admitted while the
// watermark stays at watermark.
type overdraft struct{ watermark, offsets int64 }

// NewSpan returns a span of limit offsets (at least 1).
func NewSpan(limit int) *Span {
	s := &Span{limit: int64(max(limit, 1)), moved: make(chan struct{}, 1)}
	s.watermark.Store(-1)
	return s
}

// Advance publishes the worker's watermark: the lowest unfinished admitted
// offset, or one past the last admitted one. Lower values than the last
// published are ignored. It never blocks.
func (s *Span) Advance(watermark int64) {
	for {
		cur := s.watermark.Load()
		if watermark <= cur {
			return
		}
		if s.watermark.CompareAndSwap(cur, watermark) {
			break
		}
	}
	select {
	case s.moved <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// Overdraft lets the bridge admit offsets more past the span while the
// watermark stays at watermark (the worker's own: the pinned record's
// offset). A later call for the same watermark replaces the amount; one for
// another watermark starts afresh. It never blocks.
func (s *Span) Overdraft(watermark, offsets int64) {
	s.extra.Store(&overdraft{watermark: watermark, offsets: max(offsets, 0)})
	select {
	case s.moved <- struct{}{}:
	default:
	}
}

// Overdrawn returns the offsets granted past the span for the current
// watermark; 0 when none.
func (s *Span) Overdrawn() int64 {
	if o := s.extra.Load(); o != nil && o.watermark == s.watermark.Load() {
		return o.offsets
	}
	return 0
}

// Watermark returns the last published watermark; -1 before the first.
func (s *Span) Watermark() int64 { return s.watermark.Load() }

// Limit returns the span in offsets.
func (s *Span) Limit() int64 { return s.limit }

// admits reports whether offset may be admitted now, after last, the last
// offset admitted (-1 before the first). Before the first Advance every
// offset may: the bridge publishes the first admitted offset itself, which
// no watermark of the claim can be below. Once every admitted record is
// finished (the watermark is past last), any offset may too, however far
// it lies (a gap of compacted or aborted records wider than the span): no
// record is left to pin the partition.
func (s *Span) admits(offset, last int64) bool {
	wm := s.watermark.Load()
	limit := s.limit
	if o := s.extra.Load(); o != nil && o.watermark == wm {
		limit += o.offsets
	}
	return wm < 0 || offset < wm+limit || wm > last
}

// admitted tells the span that the bridge admitted offset after last. When
// every record before it was finished, offset is the claim's watermark now.
func (s *Span) admitted(offset, last int64) {
	if s.watermark.Load() > last {
		s.Advance(offset)
	}
}

// wait returns true once offset may be admitted after last, or false when
// ctx is done or stop or ended closes first (a nil channel never does). What
// ends it: the worker's watermark moving far enough (the record pinning it
// finishes: the watermark then moves within the span, or past last), an
// overdraft reaching offset, the worker stopping, or the claim or its
// session ending.
func (s *Span) wait(ctx context.Context, offset, last int64, stop, ended <-chan struct{}) bool {
	for !s.admits(offset, last) {
		select {
		case <-s.moved:
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		case <-ended:
			return false
		}
	}
	return true
}

// waitPast returns true once the watermark is past offset (every record
// admitted up to it finished), or false when ctx is done or stop or ended
// closes first (a nil channel never does). What ends it: the records up to
// offset finishing, the worker stopping, or the claim or its session
// ending.
func (s *Span) waitPast(ctx context.Context, offset int64, stop, ended <-chan struct{}) bool {
	for s.watermark.Load() <= offset {
		select {
		case <-s.moved:
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		case <-ended:
			return false
		}
	}
	return true
}
