package actors_test

// Regression tests from the adversarial review of the outbox relay: each
// failed on the relay before its fix.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// gatedOutbox's first claim reads the outbox (empty then) and returns only
// when gate is closed: a round whose claim ran before a commit and which
// is still in flight.
type gatedOutbox struct {
	*memOutbox
	once    sync.Once
	claimed chan struct{}
	gate    chan struct{}
}

func (o *gatedOutbox) Claim(ctx context.Context, max int, exclude []messages.OutboxKind) ([]messages.OutboxMessage, func(context.Context, messages.OutboxOutcome) error, error) {
	first := false
	o.once.Do(func() { first = true })
	msgs, finish, err := o.memOutbox.Claim(ctx, max, exclude)
	if first {
		close(o.claimed)
		<-o.gate
	}
	return msgs, finish, err
}

// Stop publishes what committed before it was called, even when the round
// in flight claimed before those commits and finds nothing: one more round
// always runs after the drain is asked. (Before, the drain ended on that
// empty round and the messages waited for the next start.)
func TestStopDrainsWhatCommittedWhileARoundWasInFlight(t *testing.T) {
	o := &gatedOutbox{memOutbox: &memOutbox{}, claimed: make(chan struct{}), gate: make(chan struct{})}
	p := &logPublisher{}
	system := actors.NewActorSystem(discardLogger())
	defer system.Shutdown()
	r, err := actors.StartRelay(system, actors.RelayConfig{Store: o, Publisher: p, Interval: time.Hour, Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	<-o.claimed                                      // the first round claimed an empty outbox
	o.add(messages.OutboxPayloadStatus, "host-1", 3) // three messages commit
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopped <- r.Stop(ctx)
	}()
	time.Sleep(100 * time.Millisecond) // Stop's drain reaches the actor
	close(o.gate)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if n := o.pending(); n != 0 {
		t.Fatalf("Stop returned nil with %d messages, committed before it was called, unpublished", n)
	}
}

// slowPublisher publishes only when released.
type slowPublisher struct {
	release  chan struct{}
	inFlight atomic.Bool
}

func (p *slowPublisher) Publish(msgs []messages.OutboxMessage) []error {
	p.inFlight.Store(true)
	defer p.inFlight.Store(false)
	<-p.release
	return make([]error, len(msgs))
}

// Stop waits for the round in flight however long its publish takes: the
// caller closes the producer and the store right after it. (Before, Stop
// gave up on the actor after protoactor's 10 s and returned with the
// round still publishing.)
func TestStopWaitsForTheRoundInFlight(t *testing.T) {
	o := &memOutbox{}
	o.add(messages.OutboxPayloadStatus, "host-1", 1)
	p := &slowPublisher{release: make(chan struct{})}
	system := actors.NewActorSystem(discardLogger())
	defer system.Shutdown()
	r, err := actors.StartRelay(system, actors.RelayConfig{Store: o, Publisher: p, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for !p.inFlight.Load() {
		time.Sleep(time.Millisecond)
	}
	// Past protoactor's 10 s wait for a poisoned actor, which the old Stop relied on.
	const publishing = 10500 * time.Millisecond
	time.AfterFunc(publishing, func() { close(p.release) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = r.Stop(ctx)
	if took := time.Since(start); p.inFlight.Load() || took < publishing-50*time.Millisecond {
		t.Fatalf("Stop returned (%v) after %v, while its round was still publishing", err, took)
	}
}

var errTooLarge = errors.New("message too large for the topic")

// A message the broker refuses for good is kept aside (once), its key's
// later messages go on, and its kind is not held: one bad message neither
// blocks its host nor throttles its kind. (Before, it stayed the oldest
// message for ever: its key's later messages were published again every
// round and its kind held after each, 500 messages per 5 s fleet-wide.)
func TestARefusedForGoodMessageIsKeptAsideAndItsKeyGoesOn(t *testing.T) {
	o := &memOutbox{}
	o.add(messages.OutboxPayloadStatus, "host-poison", 3) // ids 1..3: 1 is refused for good
	for i := range 40 {
		o.add(messages.OutboxPayloadStatus, fmt.Sprintf("host-%d", i), 25)
	}
	p := &logPublisher{refuse: func(m messages.OutboxMessage) bool { return m.ID == 1 }, err: errTooLarge}
	system := actors.NewActorSystem(discardLogger())
	defer system.Shutdown()
	r, err := actors.StartRelay(system, actors.RelayConfig{Store: o, Publisher: p, Interval: time.Hour, Batch: 50,
		KindBackoff: time.Hour, RefusedForGood: func(err error) bool { return errors.Is(err, errTooLarge) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	copies := map[int64]int{}
	for _, m := range p.published() {
		copies[m.ID]++
	}
	if n := o.pending(); n != 0 || copies[2] != 1 || copies[3] != 1 || copies[1] != 0 {
		t.Fatalf("%d messages wait; the two behind the refused one were published %d and %d times, it %d", n, copies[2], copies[3], copies[1])
	}
	if len(o.refused) != 1 || o.refused[0].ID != 1 {
		t.Fatalf("kept aside: %+v, want message 1", o.refused)
	}
	if s := r.State(); s.Parked != 1 || len(s.HeldKinds) != 0 {
		t.Fatalf("state %+v: want 1 parked, no kind held", s)
	}
}
