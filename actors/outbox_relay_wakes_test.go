package actors_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// jitterOutbox is a memOutbox whose claims and finishes take a random
// moment, and which counts the claims in flight at once.
type jitterOutbox struct {
	memOutbox
	inFlight, most atomic.Int32
	maxDelay       time.Duration
}

func (o *jitterOutbox) nap() {
	if o.maxDelay > 0 {
		time.Sleep(time.Duration(rand.Int64N(int64(o.maxDelay))))
	}
}

func (o *jitterOutbox) Claim(ctx context.Context, max int, exclude []messages.OutboxKind) ([]messages.OutboxMessage, func(context.Context, messages.OutboxOutcome) error, error) {
	n := o.inFlight.Add(1)
	for {
		m := o.most.Load()
		if n <= m || o.most.CompareAndSwap(m, n) {
			break
		}
	}
	o.nap()
	msgs, finish, err := o.memOutbox.Claim(ctx, max, exclude)
	return msgs, func(ctx context.Context, out messages.OutboxOutcome) error {
		o.nap()
		defer o.inFlight.Add(-1)
		return finish(ctx, out)
	}, err
}

type jitterPublisher struct {
	logPublisher
	maxDelay time.Duration
}

func (p *jitterPublisher) Publish(msgs []messages.OutboxMessage) []error {
	if p.maxDelay > 0 {
		time.Sleep(time.Duration(rand.Int64N(int64(p.maxDelay))))
	}
	return p.logPublisher.Publish(msgs)
}

// Writers commit and wake the relay at random moments (during lingers,
// rounds, just as rounds end, full rounds followed by partial ones); once
// they stop, with no timer (Interval an hour) and no further wake, every
// message is published, one round at a time, each key in order; Stop then
// returns at once.
func TestRelayLosesNoWakeUnderRandomCommits(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), protoactorThrottle)
	for run := range 8 {
		linger := []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond}[run%5]
		batch := 1 + run%7
		useChan := run%2 == 1
		t.Run(fmt.Sprintf("run%d-linger%v-batch%d-chan%v", run, linger, batch, useChan), func(t *testing.T) {
			o := &jitterOutbox{maxDelay: 2 * time.Millisecond}
			p := &jitterPublisher{maxDelay: 2 * time.Millisecond}
			wake := make(chan struct{}, 1)
			cfg := actors.RelayConfig{Store: o, Publisher: p, Interval: time.Hour, Batch: batch, KindBackoff: time.Hour, Linger: linger}
			if useChan {
				cfg.Wake = wake
			}
			r := startRelayWith(t, cfg)
			var wg sync.WaitGroup
			var written atomic.Int64
			for w := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 25 {
						o.add(messages.OutboxPayloadStatus, fmt.Sprintf("host-%d", (w*7+i)%5), 1+rand.IntN(3*batch))
						written.Store(int64(o.total()))
						if useChan {
							select {
							case wake <- struct{}{}:
							default:
							}
						} else {
							r.Wake()
						}
						if rand.IntN(3) == 0 {
							time.Sleep(time.Duration(rand.Int64N(int64(linger + 2*time.Millisecond))))
						}
					}
				}()
			}
			wg.Wait()
			deadline := time.Now().Add(5*time.Second + 20*linger)
			for o.pending() > 0 && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
			if n := o.pending(); n > 0 {
				t.Errorf("%d messages still in the outbox %v after the last wake (linger %v, no timer): a wake was lost", n, 5*time.Second+20*linger, linger)
			}
			if m := o.most.Load(); m > 1 {
				t.Errorf("%d rounds at once", m)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := r.Stop(ctx); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			lastCopiesInOrder(t, p.published())
			if n := o.pending(); n != 0 {
				t.Fatalf("%d left after Stop", n)
			}
		})
	}
}

func (o *memOutbox) total() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return int(o.lastID)
}

// blockingBacklogOutbox's Backlog blocks until released (a slow database).
type blockingBacklogOutbox struct {
	memOutbox
	entered, release chan struct{}
	inFlight         atomic.Bool
}

func (o *blockingBacklogOutbox) Backlog(ctx context.Context) (messages.OutboxBacklog, error) {
	o.inFlight.Store(true)
	defer o.inFlight.Store(false)
	select {
	case o.entered <- struct{}{}:
	default:
	}
	select {
	case <-o.release:
	case <-ctx.Done():
	}
	return messages.OutboxBacklog{}, ctx.Err()
}

// Stop returns only when nothing of the relay still uses the store: the
// caller closes it next (effects.go closes the outbox's pool).
func TestRelayStopWaitsForTheBacklogRead(t *testing.T) {
	o := &blockingBacklogOutbox{entered: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(o.release)
	r := startRelayWith(t, actors.RelayConfig{Store: o, Publisher: &logPublisher{}, Interval: time.Hour, Linger: 50 * time.Millisecond,
		StoreTimeout: time.Second}) // the read ends by it
	select {
	case <-o.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no backlog read within 10 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if o.inFlight.Load() {
		t.Fatal("Stop returned with the relay's backlog read still using the store")
	}
}

// Stop right after wakes whose lingers are pending or just ending: every
// message committed before Stop is published, Stop returns at once, and no
// timer nor goroutine outlives it.
func TestRelayStopRacingPendingLingers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), protoactorThrottle)
	for i := range 25 {
		linger := time.Duration(i%6) * time.Millisecond
		o, p := &memOutbox{}, &logPublisher{}
		r := startRelayWith(t, actors.RelayConfig{Store: o, Publisher: p, Interval: time.Hour, Batch: 3, KindBackoff: time.Hour, Linger: linger})
		n := 0
		for j := range 1 + i%5 {
			o.add(messages.OutboxPayloadStatus, fmt.Sprintf("h%d", j%2), 1+j)
			n += 1 + j
			r.Wake()
			time.Sleep(time.Duration(rand.Int64N(int64(2 * time.Millisecond))))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		err := r.Stop(ctx)
		cancel()
		if err != nil {
			t.Fatalf("run %d: Stop: %v", i, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("run %d: Stop took %v", i, d)
		}
		if got := len(p.published()); got != n || o.pending() != 0 {
			t.Fatalf("run %d: published %d of %d, %d left", i, got, n, o.pending())
		}
		lastCopiesInOrder(t, p.published())
		time.Sleep(linger) // a timer that fired late finds the actor gone
	}
}
