package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// Readiness decides /readyz. It reads state the pipeline and the
// dependency watch already keep, so a check never waits on the database
// nor on the work. It remembers its last verdict to log each change between
// ready and not ready, with the reason: one line per change, however often
// it is asked. Use it by pointer; safe for concurrent use.
type Readiness struct {
	Bridge *actors.Bridge
	// Dependencies are the dependencies judged by a check of their own
	// (the database, for the listener); none for a handler without.
	Dependencies []*DependencyWatch
	// PinLimit: a partition whose oldest unfinished record has held the
	// watermark longer than this makes the process not ready; so does one
	// that has had records waiting and none admitted for that long.
	PinLimit time.Duration
	// Stalls remembers partitions that admit nothing; nil: not judged.
	Stalls *StallWatch
	// Logger receives the changes of verdict; nil: not logged.
	Logger *slog.Logger

	mu    sync.Mutex // one check at a time: the verdict kept is the one logged last
	ready bool       // the last verdict; false before the first: starting
}

// Check returns whether the process is ready at now, and why not.
func (r *Readiness) Check(now time.Time) (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok, why := r.judge(now)
	changed := ok != r.ready
	r.ready = ok
	if changed && r.Logger != nil {
		if ok {
			r.Logger.Info("readiness: ready")
		} else {
			r.Logger.Warn("readiness: not ready", "reason", why)
		}
	}
	return ok, why
}

// Ready is the last verdict Check gave; false before the first.
func (r *Readiness) Ready() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready
}

func (r *Readiness) judge(now time.Time) (bool, string) {
	if !r.Bridge.Joined() {
		return false, "not joined to the consumer group"
	}
	states := r.Bridge.Partitions()
	for _, p := range states {
		if b := p.DeadLetterBlocked; b != nil {
			// A person must act: the record stays unfinished until a write succeeds.
			return false, fmt.Sprintf("%s/%d: dead-letter write of offset %d failing for %v (%d writes): %s",
				p.Topic, p.Partition, b.Offset, now.Sub(b.Since).Round(100*time.Millisecond), b.Writes, b.Error)
		}
	}
	for _, p := range states {
		if d := p.PinnedFor(now); r.PinLimit > 0 && d > r.PinLimit {
			why := fmt.Sprintf("%s/%d: watermark pinned for %v by offset %d (key %q)", p.Topic, p.Partition, d.Round(100*time.Millisecond), p.PinnedOffset, p.PinnedKey)
			if f := p.PinnedFailure; f != nil {
				why += fmt.Sprintf(", attempt %d failed: %s", f.GetAttempt(), f.GetError())
				if f.GetBlame() == messages.Blame_BLAME_NO_EVIDENCE {
					why += " (held: nothing to judge its failures by; an operator may release it, docs/consumer.md)"
				}
			}
			if !p.SpanBlocked.IsZero() {
				why += fmt.Sprintf("; span-blocked for %v: nothing is admitted %d offsets past it", now.Sub(p.SpanBlocked).Round(100*time.Millisecond), p.SpanLimit)
			}
			return false, why
		}
	}
	if r.Stalls != nil {
		if stalled, why := r.Stalls.Stalled(states, now, r.PinLimit); stalled {
			return false, why
		}
	}
	for _, d := range r.Dependencies {
		if up, why := d.Up(now); !up {
			return false, why
		}
	}
	return true, "ready"
}

// Watch checks every interval until ctx is done, so a change of verdict is
// logged when it happens, not when a probe next asks.
func (r *Readiness) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.Check(now)
		}
	}
}
