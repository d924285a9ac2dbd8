package telemetry

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Down only once the checks have failed without a break for the grace;
// up again at the first check that passes; a new failure starts the clock
// over.
func TestDependencyWatchHysteresis(t *testing.T) {
	w := NewDependencyWatch("database", nil, 10*time.Second, time.Second)
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	refused := errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")

	if up, _ := w.Up(t0); !up {
		t.Fatal("down before any check")
	}
	w.Record(at(0), refused)
	for _, d := range []time.Duration{0, time.Second, 9*time.Second + 999*time.Millisecond} {
		if up, why := w.Up(at(d)); !up {
			t.Fatalf("down %v into the failures, within the 10s grace: %q", d, why)
		}
	}
	w.Record(at(4*time.Second), errors.New("no answer: context deadline exceeded"))
	up, why := w.Up(at(12 * time.Second))
	if up {
		t.Fatal("still up after 12s of failed checks")
	}
	if want := "database unreachable for 12s (since 12:00:00 UTC): no answer: context deadline exceeded"; why != want {
		t.Fatalf("reason %q, want %q", why, want)
	}

	w.Record(at(13*time.Second), nil)
	if up, why := w.Up(at(13 * time.Second)); !up {
		t.Fatalf("down right after a check passed: %q", why)
	}
	w.Record(at(14*time.Second), refused)
	if up, why := w.Up(at(23 * time.Second)); !up {
		t.Fatalf("a new run of failures inherited the old one's start: %q", why)
	}
	if up, _ := w.Up(at(24 * time.Second)); up {
		t.Fatal("up after the new run of failures lasted the grace")
	}

	// A grace of zero: down at the first failure.
	z := NewDependencyWatch("database", nil, 0, time.Second)
	z.Record(t0, refused)
	if up, _ := z.Up(t0); up {
		t.Fatal("grace 0: up after a failed check")
	}
}

// Run checks in the background: down once the failures outlast the grace,
// up again within an interval of the first check that passes; a check that
// does not answer within the timeout counts as failed.
func TestDependencyWatchRun(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	var calls atomic.Int64
	ping := func(ctx context.Context) error {
		calls.Add(1)
		if !failing.Load() {
			return nil
		}
		<-ctx.Done() // a server that does not answer
		return ctx.Err()
	}
	const grace, interval, timeout = 300 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond
	w := NewDependencyWatch("database", ping, grace, timeout)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); w.Run(ctx, interval) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "the first failed check", func() bool { return calls.Load() >= 2 })
	if up, why := w.Up(time.Now()); !up && time.Since(start) < grace {
		t.Fatalf("down before the grace: %q", why)
	}
	waitFor(t, "down after the grace", func() bool { up, _ := w.Up(time.Now()); return !up })
	if took := time.Since(start); took < grace {
		t.Fatalf("down after %v, before the %v grace", took, grace)
	}
	_, why := w.Up(time.Now())
	if !strings.HasPrefix(why, "database unreachable for ") || !strings.HasSuffix(why, "context deadline exceeded") {
		t.Fatalf("reason %q", why)
	}
	failing.Store(false)
	waitFor(t, "up again", func() bool { up, _ := w.Up(time.Now()); return up })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A check that panics is a failed check, not a dead process.
func TestAPanickingCheckIsAFailedCheck(t *testing.T) {
	w := NewDependencyWatch("database", func(context.Context) error { panic("nil pool") }, 0, time.Second)
	w.Check(context.Background())
	if up, why := w.Up(time.Now()); up || !strings.Contains(why, "panicked") || !strings.Contains(why, "nil pool") {
		t.Fatalf("after a panicking check: up %v, %q", up, why)
	}
}
