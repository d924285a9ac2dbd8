package telemetry

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// DependencyWatch judges a dependency (the database) for readiness. Run
// checks it in the background, so /readyz reads a verdict and never waits
// on the dependency. One failed check does not make it down: it counts as
// down once its checks have failed continuously for the grace, and as up
// again at the first check that passes, so a blip does not flap readiness.
// It starts up: its owner has just connected. Safe for concurrent use.
type DependencyWatch struct {
	name    string
	ping    func(context.Context) error
	grace   time.Duration
	timeout time.Duration
	// onCheck, when set, hears each check's outcome (OnCheck).
	onCheck func(start time.Time, err error)

	mu           sync.Mutex
	failingSince time.Time // start of the first failed check in a row; zero while checks pass
	lastErr      error     // the latest failure's error
}

// NewDependencyWatch watches the dependency called name through ping,
// which must return by its context's deadline (timeout) and whose errors
// must carry no secret: they are shown in the readiness reason.
func NewDependencyWatch(name string, ping func(context.Context) error, grace, timeout time.Duration) *DependencyWatch {
	return &DependencyWatch{name: name, ping: ping, grace: grace, timeout: timeout}
}

// OnCheck makes every check that ran to its end (not one cut short by Run's
// context ending) report when it began and its outcome to f as well; call
// it before Run.
func (w *DependencyWatch) OnCheck(f func(start time.Time, err error)) { w.onCheck = f }

// Run checks at once, then every interval, until ctx is done. Checks do not
// overlap: a slow one delays the next.
func (w *DependencyWatch) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		w.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check pings once, with the watch's timeout, and records the outcome.
func (w *DependencyWatch) Check(ctx context.Context) {
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, w.timeout)
	err := w.safePing(pctx)
	cancel()
	if ctx.Err() != nil {
		return // stopping: an interrupted check says nothing about the dependency
	}
	if w.onCheck != nil {
		w.onCheck(start, err)
	}
	w.Record(start, err)
}

// safePing is ping with a panic read as a failed check: a health check's
// bug must not stop the process.
func (w *DependencyWatch) safePing(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the %s check panicked: %v", w.name, p)
		}
	}()
	return w.ping(ctx)
}

// Record records the outcome of a check that began at start.
func (w *DependencyWatch) Record(start time.Time, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.failingSince, w.lastErr = time.Time{}, nil
		return
	}
	if w.failingSince.IsZero() {
		w.failingSince = start
	}
	w.lastErr = err
}

// Up reports whether the dependency counts as up at now and, when it does
// not, why: what failed, for how long, since when.
func (w *DependencyWatch) Up(now time.Time) (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failingSince.IsZero() {
		return true, ""
	}
	d := now.Sub(w.failingSince)
	if d < w.grace {
		return true, ""
	}
	return false, fmt.Sprintf("%s unreachable for %v (since %s): %v", w.name, d.Round(time.Second),
		w.failingSince.UTC().Format("15:04:05 UTC"), w.lastErr)
}
