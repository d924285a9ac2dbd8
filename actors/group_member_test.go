package actors_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

// failingGroup is a consumer group whose first sessions fail as a join to a
// dead coordinator does (a network error, not a coordinator error code). It
// records, for each Consume, how many coordinator refreshes came before it.
type failingGroup struct {
	sarama.ConsumerGroup // nil: calling anything else panics
	failures             int
	// refreshHangs, when set, holds every RefreshCoordinator until closed,
	// as a refresh against brokers that stopped answering does.
	refreshHangs chan struct{}

	mu        sync.Mutex
	refreshes int
	seen      []int // refreshes before each Consume
	errs      chan error
}

func (g *failingGroup) Consume(ctx context.Context, _ []string, _ sarama.ConsumerGroupHandler) error {
	g.mu.Lock()
	g.seen = append(g.seen, g.refreshes)
	n := len(g.seen)
	g.mu.Unlock()
	if n <= g.failures {
		return io.EOF
	}
	<-ctx.Done()
	return nil
}

func (g *failingGroup) RefreshCoordinator() error {
	if g.refreshHangs != nil {
		<-g.refreshHangs
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refreshes++
	return nil
}

func (g *failingGroup) Errors() <-chan error { return g.errs }
func (g *failingGroup) Close() error         { close(g.errs); return nil }

// A member whose session failed asks for the group's coordinator again before
// each rejoin: sarama keeps a coordinator that died at the network level, so
// without it every rejoin goes back to the dead node.
func TestAFailedSessionRefreshesTheCoordinatorBeforeRejoining(t *testing.T) {
	g := &failingGroup{failures: 3, errs: make(chan error)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- actors.RunMember(ctx, g, []string{"t"}, nil, discardLogger()) }()

	deadline := time.After(10 * time.Second) // 100+200+400 ms of backoff is what it needs
	for {
		g.mu.Lock()
		n := len(g.seen)
		g.mu.Unlock()
		if n == g.failures+1 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the member joined %d times, want %d", n, g.failures+1)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunMember: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, before := range g.seen {
		if before != i {
			t.Fatalf("join %d came after %d coordinator refreshes, want %d (one per failed session): %v", i+1, before, i, g.seen)
		}
	}
}

// The wait between failed sessions stops growing at 2 s: the coordinator a
// rejoin needs is found by the next join, so a longer wait is stall. The
// waits are read from the member's own warnings, not timed.
func TestRejoinWaitsAreBounded(t *testing.T) {
	g := &failingGroup{failures: 6, errs: make(chan error)}
	var logged syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- actors.RunMember(ctx, g, []string{"t"}, nil, slog.New(slog.NewJSONHandler(&logged, nil)))
	}()
	deadline := time.After(20 * time.Second) // 0.1+0.2+0.4+0.8+1.6+2 s with the bound
	for joined := 0; joined < g.failures+1; {
		select {
		case <-deadline:
			t.Fatalf("the member joined %d times, want %d", joined, g.failures+1)
		case <-time.After(10 * time.Millisecond):
		}
		g.mu.Lock()
		joined = len(g.seen)
		g.mu.Unlock()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunMember: %v", err)
	}
	var waits []time.Duration
	dec := json.NewDecoder(strings.NewReader(logged.String()))
	for {
		var line struct {
			Msg string
			In  time.Duration // slog's JSON writes a duration in nanoseconds
		}
		if err := dec.Decode(&line); err != nil {
			break
		}
		if line.Msg == "consumer group session failed; rejoining" {
			waits = append(waits, line.In)
		}
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 2 * time.Second}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits between failed sessions %v, want %v", waits, want)
	}
}

// A shutdown does not wait for a coordinator refresh that hangs (sarama's
// refresh takes no context and waits out its network timeouts when the
// brokers are cut off): RunMember returns as its context ends.
func TestShutdownDoesNotWaitForACoordinatorRefresh(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	g := &failingGroup{failures: 1, errs: make(chan error), refreshHangs: hang}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- actors.RunMember(ctx, g, []string{"t"}, nil, discardLogger()) }()
	for { // the first session has failed once the member asks for a refresh
		g.mu.Lock()
		n := len(g.seen)
		g.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunMember: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunMember still running 5 s after its context ended, waiting on the coordinator refresh")
	}
}
