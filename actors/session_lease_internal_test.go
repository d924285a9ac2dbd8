package actors

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// The lease lapses strictly after a session timeout without a confirmation,
// a confirmation wakes its waiters and renews it, and a late answer to an
// older question never moves it back.
func TestSessionLeaseLapsesAfterASessionTimeout(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := newSessionLease(time.Second, t0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if lapsed, _ := l.lapsed(t0.Add(time.Second)); lapsed {
		t.Fatal("lapsed at exactly the session timeout")
	}
	lapsed, next := l.lapsed(t0.Add(time.Second + time.Nanosecond))
	if !lapsed || next == nil {
		t.Fatal("not lapsed past the session timeout")
	}
	l.confirm(t0.Add(2 * time.Second))
	select {
	case <-next:
	default:
		t.Fatal("a confirmation did not wake the waiters")
	}
	if lapsed, _ := l.lapsed(t0.Add(2500 * time.Millisecond)); lapsed {
		t.Fatal("lapsed half a session timeout after a confirmation")
	}
	l.confirm(t0.Add(1500 * time.Millisecond)) // an older question answered late
	if lapsed, _ := l.lapsed(t0.Add(2900 * time.Millisecond)); lapsed {
		t.Fatal("an older confirmation moved the lease back")
	}
	if lapsed, _ := l.lapsed(t0.Add(3001 * time.Millisecond)); !lapsed {
		t.Fatal("not lapsed a session timeout after the newest confirmation")
	}
}

// A wait on a lapsed lease ends with the claim, the worker or the session,
// false; on a live one at once, true.
func TestSessionLeaseWaitEnds(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	live := newSessionLease(time.Hour, time.Now(), quiet)
	if !live.wait(context.Background(), nil, nil) {
		t.Fatal("a live lease did not let the feed on")
	}
	closed := make(chan struct{})
	close(closed)
	old := time.Now().Add(-time.Hour)
	for name, wait := range map[string]func(l *sessionLease) bool{
		"claim ended":    func(l *sessionLease) bool { return l.wait(context.Background(), nil, closed) },
		"worker stopped": func(l *sessionLease) bool { return l.wait(context.Background(), closed, nil) },
		"session ended": func(l *sessionLease) bool {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return l.wait(ctx, nil, nil)
		},
	} {
		if wait(newSessionLease(time.Second, old, quiet)) {
			t.Errorf("%s: the wait let the feed on", name)
		}
	}
	l := newSessionLease(time.Second, old, quiet)
	done := make(chan bool)
	go func() { done <- l.wait(context.Background(), nil, nil) }()
	l.confirm(time.Now())
	if !<-done {
		t.Fatal("a confirmation did not end the wait")
	}
}
