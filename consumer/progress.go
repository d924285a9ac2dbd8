package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/patchflow/patchflow/actors"
)

// What the operator is told while the consumer runs, besides the
// configuration at start and the stop summary: a progress line every
// Config.ProgressInterval when something changed, a line when every
// partition has caught up and when it falls behind again, and a
// rate-limited warning per dependency failing for other records too (how
// many partitions a shutdown drains is Run's line). Each decision is a
// plain value (progress, catchUp, troubleWatch) stepped by a loop that only
// reads the bridge and logs.

// watchInterval is how often the catch-up state and the dependencies'
// failures are looked at.
const watchInterval = time.Second

// behindAfter is how long a caught-up listener must have had records to
// read before it says it fell behind: a stream that arrives as fast as it is
// read has lag most of the time, and would otherwise flap.
const behindAfter = 10 * time.Second

// troubleEvery is the least time between two warnings about one dependency;
// troubleQuiet how long it must have had no failure to be called recovered.
const (
	troubleEvery = 10 * time.Second
	troubleQuiet = 10 * time.Second
)

// view is what one look at the bridge sees.
type view struct {
	stats      actors.StatsSnapshot
	limit      int
	partitions int
	lag        int64
	// caughtUp: at least one partition is claimed and each one has read
	// all there is and finished it (see caughtUp).
	caughtUp bool
}

func look(bridge *actors.Bridge) view {
	parts := bridge.Partitions()
	v := view{stats: bridge.Stats().Snapshot(), limit: bridge.Concurrency().Limit, partitions: len(parts), caughtUp: caughtUp(parts)}
	for _, p := range parts {
		v.lag += p.Lag()
	}
	return v
}

// caughtUp reports whether every partition has read and finished all there
// is: nothing in flight, fetched and waiting, or held back, and no lag
// against a high watermark the consumer has seen; or settled (the broker
// confirmed nothing is left). A partition whose high watermark is not known
// yet (0) must settle.
func caughtUp(parts []actors.PartitionState) bool {
	if len(parts) == 0 {
		return false
	}
	for _, p := range parts {
		if p.Settled {
			continue
		}
		if p.InFlight > 0 || p.Buffered > 0 || !p.WaitingForCredit.IsZero() || !p.SpanBlocked.IsZero() || !p.Unconfirmed.IsZero() ||
			p.HighWatermark <= 0 || p.Lag() > 0 {
			return false
		}
	}
	return true
}

// progress decides the progress lines: one per interval, unless nothing
// changed since the last line.
type progress struct {
	last   view
	lastAt time.Time
}

// step returns the line's attributes at now, or nil when nothing changed.
func (p *progress) step(now time.Time, v view) []any {
	s, prev := v.stats, p.last.stats
	done := (s.Succeeded + s.Skipped + s.DeadLettered + s.Resumed) - (prev.Succeeded + prev.Skipped + prev.DeadLettered + prev.Resumed)
	changed := done != 0 || s.InFlight != prev.InFlight || s.Retried != prev.Retried || s.Abandoned != prev.Abandoned ||
		v.lag != p.last.lag || v.limit != p.last.limit || v.partitions != p.last.partitions
	if !changed && !p.lastAt.IsZero() {
		return nil
	}
	rate := int64(0)
	if !p.lastAt.IsZero() {
		rate = int64(float64(done) / now.Sub(p.lastAt).Seconds())
	}
	p.last, p.lastAt = v, now
	return []any{"records_per_second", rate, "lag", v.lag, "partitions", v.partitions, "in_flight", s.InFlight, "limit", v.limit,
		"succeeded", s.Succeeded, "skipped", s.Skipped, "dead_lettered", s.DeadLettered, "retried", s.Retried, "resumed", s.Resumed}
}

// catchUp decides the caught-up and fell-behind lines.
type catchUp struct {
	said        bool      // "caught up" was the last thing said
	behindSince time.Time // when the caught-up state last ended; zero while caught up or never
}

// step returns "caught up", "behind" or "" (nothing to say) at now.
func (c *catchUp) step(now time.Time, up bool) string {
	switch {
	case up:
		c.behindSince = time.Time{}
		if !c.said {
			c.said = true
			return "caught up"
		}
	case c.said:
		if c.behindSince.IsZero() {
			c.behindSince = now
		}
		if now.Sub(c.behindSince) >= behindAfter {
			c.said, c.behindSince = false, time.Time{}
			return "behind"
		}
	}
	return ""
}

// troubleWatch decides the dependency warnings from the failures taken
// every watchInterval. Only shared failures (the dependency failing for
// others too) warn: a record's own failures end in its dead letter, which
// is logged by itself. A dependency warns at most once per troubleEvery,
// counting every failure since its previous warning; once it has had no
// failure for troubleQuiet, one line says it recovered and how long it
// failed. Its entry is kept (one per dependency name), so a warning right
// after a recovery still waits for troubleEvery since the last one; what it
// gathers of own failures alone is dropped every troubleEvery.
type troubleWatch struct {
	deps map[string]*trouble
}

type trouble struct {
	pending  actors.DependencyFailures // since the last warning (Records unused)
	records  map[string]struct{}       // the records failing since the last warning
	since    time.Time                 // the start of the pending failures' period
	warnedAt time.Time                 // the last warning; zero: never
	// failing is set from a warning until the recovery line; episode is
	// when the failures it warned of began.
	failing     bool
	episode     time.Time
	lastFailure time.Time
}

// troubleLine is one line the watch wants logged.
type troubleLine struct {
	warn bool // a warning; otherwise the recovery
	actors.DependencyFailures
	records int           // distinct records failing over the period
	over    time.Duration // a warning's period; a recovery's: how long it failed
}

func (w *troubleWatch) step(now time.Time, taken []actors.DependencyFailures) []troubleLine {
	if w.deps == nil {
		w.deps = map[string]*trouble{}
	}
	for _, f := range taken {
		t := w.deps[f.Dependency]
		if t == nil {
			t = &trouble{}
			w.deps[f.Dependency] = t
		}
		if t.pending.Attempts == 0 {
			t.pending = actors.DependencyFailures{Dependency: f.Dependency}
			t.records = map[string]struct{}{}
			t.since = now.Add(-watchInterval) // a take covers the interval before it
		}
		t.pending.Attempts += f.Attempts
		t.pending.Shared += f.Shared
		t.pending.LastError = f.LastError
		for _, r := range f.Records {
			t.records[r] = struct{}{}
		}
		t.lastFailure = now
	}
	var out []troubleLine
	for name, t := range w.deps {
		switch {
		case t.pending.Shared > 0 && (t.warnedAt.IsZero() || now.Sub(t.warnedAt) >= troubleEvery):
			if !t.failing {
				t.failing, t.episode = true, t.since
			}
			out = append(out, troubleLine{warn: true, DependencyFailures: t.pending, records: len(t.records), over: now.Sub(t.since)})
			t.warnedAt, t.pending, t.records = now, actors.DependencyFailures{}, nil
		case t.failing && now.Sub(t.lastFailure) >= troubleQuiet:
			out = append(out, troubleLine{DependencyFailures: actors.DependencyFailures{Dependency: name}, over: t.lastFailure.Sub(t.episode)})
			t.failing = false
		case t.pending.Attempts > 0 && t.pending.Shared == 0 && now.Sub(t.since) >= troubleEvery:
			t.pending, t.records = actors.DependencyFailures{}, nil // own failures only: dropped
		}
	}
	return out
}

// logProgress logs progress every interval (0: never), and watches catch-up
// and dependency trouble every watchInterval, until ctx is done.
func logProgress(ctx context.Context, bridge *actors.Bridge, every time.Duration, logger *slog.Logger) {
	deps := bridge.Dependencies()
	watch := time.NewTicker(watchInterval)
	defer watch.Stop()
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	var (
		prog    = progress{lastAt: time.Now()}
		up      catchUp
		trouble troubleWatch
	)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick:
			if attrs := prog.step(now, look(bridge)); attrs != nil {
				logger.Info("progress", attrs...)
			}
		case now := <-watch.C:
			v := look(bridge)
			switch up.step(now, v.caughtUp) {
			case "caught up":
				logger.Info("caught up: every partition has read and finished all there is", "partitions", v.partitions,
					"succeeded", v.stats.Succeeded, "skipped", v.stats.Skipped, "dead_lettered", v.stats.DeadLettered)
			case "behind":
				logger.Info("behind: records to read again", "lag", v.lag, "in_flight", v.stats.InFlight, "partitions", v.partitions)
			}
			for _, l := range trouble.step(now, deps.TakeFailures()) {
				if l.warn {
					logger.Warn(fmt.Sprintf("dependency %s failing for others too; retrying its records until it recovers", l.Dependency),
						"dependency", l.Dependency, "error", l.LastError, "records_retrying", l.records,
						"failed_attempts", l.Attempts, "over", l.over.Round(time.Second))
				} else {
					logger.Info(fmt.Sprintf("dependency %s recovered", l.Dependency), "dependency", l.Dependency,
						"failed_for", l.over.Round(time.Second))
				}
			}
		}
	}
}
