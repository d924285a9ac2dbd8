package actors_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// timedOutbox is a memOutbox that notes when each claim came.
type timedOutbox struct {
	memOutbox
	tmu    sync.Mutex
	claims []time.Time
}

func (o *timedOutbox) Claim(ctx context.Context, max int, exclude []messages.OutboxKind) ([]messages.OutboxMessage, func(context.Context, messages.OutboxOutcome) error, error) {
	o.tmu.Lock()
	o.claims = append(o.claims, time.Now())
	o.tmu.Unlock()
	return o.memOutbox.Claim(ctx, max, exclude)
}

func (o *timedOutbox) claimTimes() []time.Time {
	o.tmu.Lock()
	defer o.tmu.Unlock()
	return append([]time.Time(nil), o.claims...)
}

func startLingeringRelay(t *testing.T, o actors.OutboxStore, p *logPublisher, batch int, linger time.Duration) *actors.Relay {
	t.Helper()
	return startRelayWith(t, actors.RelayConfig{Store: o, Publisher: p, Interval: time.Hour, Batch: batch, KindBackoff: time.Hour, Linger: linger})
}

// Commits waking the relay all the time do not start a round each: the
// rounds they ask for start a linger apart, and carry what the commits
// wrote meanwhile. Without the linger they ran back to back, a few
// milliseconds apart.
func TestRelayRoundsAskedByWakesStartALingerApart(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), protoactorThrottle)
	const linger = 100 * time.Millisecond
	o, p := &timedOutbox{}, &logPublisher{}
	r := startLingeringRelay(t, o, p, 500, linger)
	written := 0
	for end := time.Now().Add(8 * linger); time.Now().Before(end); written++ {
		o.add(messages.OutboxPayloadStatus, "host", 1)
		r.Wake()
		time.Sleep(time.Millisecond)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(p.published()); got != written {
		t.Fatalf("published %d of %d messages", got, written)
	}
	claims := o.claimTimes()
	// The drain's rounds (at the end) do not wait: judge the rounds the
	// wakes asked for, those that started well before the writing ended.
	// A round's claim comes a little after its start, hence linger/2.
	for i := 1; i < len(claims) && claims[i].Before(claims[0].Add(7*linger)); i++ {
		if gap := claims[i].Sub(claims[i-1]); gap < linger/2 {
			t.Errorf("round %d claimed %v after the one before, linger %v", i, gap, linger)
		}
	}
	if len(claims) < 4 || len(claims) > 14 {
		t.Errorf("%d rounds for %d messages written over %v with a linger of %v: want between 4 and 14", len(claims), written, 8*linger, linger)
	}
}

// A full round's next starts at once, whatever the linger: a backlog is
// published at the batch's pace, not one batch per linger.
func TestRelayDoesNotLingerAfterAFullRound(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), protoactorThrottle)
	o, p := &memOutbox{}, &logPublisher{}
	for _, k := range []string{"host-1", "host-2", "host-3"} {
		o.add(messages.OutboxRemediation, k, 8)
	}
	r := startLingeringRelay(t, o, p, 4, time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for len(p.published()) < 24 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := len(p.published()); got != 24 {
		t.Fatalf("published %d of 24 within 10 s with a linger of an hour: a full round's next waited for it", got)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Stop's rounds never wait for the linger: a relay whose round just
// started drains what waits at once.
func TestRelayDrainDoesNotLinger(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), protoactorThrottle)
	o, p := &memOutbox{}, &logPublisher{}
	r := startLingeringRelay(t, o, p, 500, time.Hour)
	for deadline := time.Now().Add(10 * time.Second); o.claimCount() == 0; { // the start's round
		if time.Now().After(deadline) {
			t.Fatal("the relay's start ran no round within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	o.add(messages.OutboxPayloadStatus, "host", 3)
	r.Wake() // held by the linger
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("Stop with a linger of an hour: %v", err)
	}
	if got := len(p.published()); got != 3 {
		t.Fatalf("published %d of 3", got)
	}
}

func (o *memOutbox) claimCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.claims
}
