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
	for l.waiters() == 0 { // blocked on the lapsed lease, not yet confirmed
		time.Sleep(time.Millisecond)
	}
	l.confirm(time.Now())
	if !<-done {
		t.Fatal("a confirmation did not end the wait")
	}
}

// A coordinator slow to answer, but within the session timeout, keeps the
// lease: questions do not wait for the one before, and each yes is dated
// when it was asked. With a session timeout of 1 s, answers taking 0.5 s
// and a question every 0.25 s, the newest confirmation is at most 0.75 s
// old; asked one at a time, it was 1.25 s old before each answer.
func TestASlowCoordinatorKeepsTheLease(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := newSessionLease(time.Second, time.Now(), quiet)
	slow := func(ctx context.Context, _ int32, _ string) error {
		select {
		case <-time.After(500 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.keep(ctx, LeaseConfig{Check: slow, SessionTimeout: time.Second, Interval: 250 * time.Millisecond}, func() (int32, string) { return 1, "m" })
	}()
	defer func() { cancel(); <-done }()
	for start := time.Now(); time.Since(start) < 4*time.Second; time.Sleep(10 * time.Millisecond) {
		if l.lapsedNow() {
			t.Fatalf("the lease lapsed %v in, with every answer in 0.5 s", time.Since(start).Round(time.Millisecond))
		}
	}
}

// keep returns once its context ends, even while a question whose Check
// ignores the context is out.
func TestKeepReturnsWithAQuestionOut(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := newSessionLease(time.Second, time.Now(), quiet)
	asked, release := make(chan struct{}, 1), make(chan struct{})
	deaf := func(context.Context, int32, string) error {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-release
		return nil
	}
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.keep(ctx, LeaseConfig{Check: deaf, SessionTimeout: time.Hour, Interval: time.Millisecond}, func() (int32, string) { return 1, "m" })
	}()
	<-asked
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("keep did not return 5 s after its context ended, a question out")
	}
}
