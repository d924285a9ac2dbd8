package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// A member its coordinator stops confirming (cut off from it, while its
// partitions' leaders still serve it) admits nothing once a session timeout
// has passed without a confirmation: the coordinator has thrown it out by
// then, and every record it ran would be run again by the partition's next
// owner. The record in hand waits, shown on the partition, and is admitted
// once the coordinator confirms the member again.
func TestBridgeHoldsAdmissionWhileTheCoordinatorDoesNotConfirm(t *testing.T) {
	var confirms atomic.Bool
	confirms.Store(true)
	check := func(ctx context.Context, generation int32, member string) error {
		if generation != 1 || member != "member" {
			t.Errorf("asked about %s at generation %d", member, generation)
		}
		if confirms.Load() {
			return nil
		}
		return errors.New("no answer")
	}
	var handled atomic.Int64
	b, err := actors.NewBridge(actors.BridgeConfig{
		System: newTestSystem(t), Settings: testSettings(ordering.Unordered),
		Handler:     actors.HandlerFunc(func(context.Context, *messages.Record) error { handled.Add(1); return nil }),
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		Lease:       &actors.LeaseConfig{Check: check, SessionTimeout: 300 * time.Millisecond, Interval: 10 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess := &fakeSession{ctx: ctx, marker: &recordingMarker{}}
	if err := b.Setup(sess); err != nil {
		t.Fatal(err)
	}
	claim := &fakeClaim{msgs: make(chan *sarama.ConsumerMessage, 1), errs: make(chan *sarama.ConsumerError)}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := b.ConsumeClaim(sess, claim); err != nil {
			t.Error(err)
		}
	})
	unconfirmed := func() bool {
		ps := b.Partitions()
		return len(ps) == 1 && !ps[0].Unconfirmed.IsZero()
	}
	pushed := int64(0)
	push := func() {
		claim.msgs <- &sarama.ConsumerMessage{Topic: "events", Offset: pushed, Key: []byte{byte(pushed)}}
		pushed++
	}
	// Confirmed: records flow for well past a session timeout.
	for start := time.Now(); time.Since(start) < time.Second; {
		push()
		waitFor(t, "the record handled", func() bool { return handled.Load() == pushed })
		if unconfirmed() {
			t.Fatal("admission held while the coordinator confirms the member")
		}
	}
	// Unconfirmed: records flow until the lease lapses, then one waits.
	confirms.Store(false)
	for lapse := time.Now(); !unconfirmed(); {
		if time.Since(lapse) > 5*time.Second {
			t.Fatalf("admission not held 5 s after the coordinator stopped confirming (session timeout 300ms); %d records handled", handled.Load())
		}
		push()
		waitFor(t, "the record handled or admission held", func() bool { return handled.Load() == pushed || unconfirmed() })
	}
	if got := handled.Load(); got != pushed-1 {
		t.Fatalf("handled %d of %d records with admission held; want all but the one in hand", got, pushed)
	}
	if !unconfirmed() || handled.Load() != pushed-1 {
		t.Fatal("the record in hand was admitted without a confirmation")
	}
	// Confirmed again: the record in hand goes in.
	confirms.Store(true)
	waitFor(t, "the held record handled", func() bool { return handled.Load() == pushed && !unconfirmed() })
	claim.close()
	wg.Wait()
	if err := b.Cleanup(sess); err != nil {
		t.Fatal(err)
	}
}

// movingSession is a session a cooperative rebalance moves to the next
// generation without ending it, as sarama's does.
type movingSession struct {
	fakeSession
	generation atomic.Int32
}

func (s *movingSession) GenerationID() int32 { return s.generation.Load() }

// The lease asks about the session's generation as it is at each
// question: a cooperative rebalance keeps the session (and its claims)
// across generations, and the coordinator answers a heartbeat of the
// generation it left ILLEGAL_GENERATION. Asking about the generation the
// session began with held every member's admission a session timeout
// after the first cooperative rebalance, for good.
func TestTheLeaseFollowsTheSessionsGeneration(t *testing.T) {
	sess := &movingSession{}
	sess.generation.Store(1)
	check := func(ctx context.Context, generation int32, member string) error {
		if generation != sess.GenerationID() {
			return fmt.Errorf("generation %d: %w", generation, sarama.ErrIllegalGeneration)
		}
		return nil
	}
	var handled atomic.Int64
	b, err := actors.NewBridge(actors.BridgeConfig{
		System: newTestSystem(t), Settings: testSettings(ordering.Unordered),
		Handler:     actors.HandlerFunc(func(context.Context, *messages.Record) error { handled.Add(1); return nil }),
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		Lease:       &actors.LeaseConfig{Check: check, SessionTimeout: 200 * time.Millisecond, Interval: 10 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess.fakeSession = fakeSession{ctx: ctx, marker: &recordingMarker{}}
	if err := b.Setup(sess); err != nil {
		t.Fatal(err)
	}
	claim := &fakeClaim{msgs: make(chan *sarama.ConsumerMessage, 1), errs: make(chan *sarama.ConsumerError)}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := b.ConsumeClaim(sess, claim); err != nil {
			t.Error(err)
		}
	})
	pushed := int64(0)
	sess.generation.Store(2) // the cooperative rebalance: same session, same claim
	for start := time.Now(); time.Since(start) < time.Second; {
		claim.msgs <- &sarama.ConsumerMessage{Topic: "events", Offset: pushed, Key: []byte{byte(pushed)}}
		pushed++
		waitFor(t, "the record handled or admission held", func() bool {
			ps := b.Partitions()
			return handled.Load() == pushed || (len(ps) == 1 && !ps[0].Unconfirmed.IsZero())
		})
		if handled.Load() != pushed {
			t.Fatalf("admission held %v after the session moved to generation 2; %d of %d records handled", time.Since(start).Round(time.Millisecond), handled.Load(), pushed)
		}
	}
	claim.close()
	wg.Wait()
	if err := b.Cleanup(sess); err != nil {
		t.Fatal(err)
	}
}

// A record taken in hand while the lease held, then waiting for a credit
// past the lapse, is not admitted when the credit comes: it gives the
// credit back and waits for a confirmation. Then a revoke ends that wait.
func TestTheLeaseIsAskedAgainOnceTheRecordHasItsCredit(t *testing.T) {
	var confirms atomic.Bool
	confirms.Store(true)
	check := func(context.Context, int32, string) error {
		if confirms.Load() {
			return nil
		}
		return errors.New("no answer")
	}
	release := make(chan struct{})
	var handled atomic.Int64
	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 1
	const timeout = 200 * time.Millisecond
	b, err := actors.NewBridge(actors.BridgeConfig{
		System: newTestSystem(t), Settings: s,
		Handler: actors.HandlerFunc(func(ctx context.Context, r *messages.Record) error {
			if r.GetOffset() == 0 {
				<-release
			}
			handled.Add(1)
			return nil
		}),
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		Lease:       &actors.LeaseConfig{Check: check, SessionTimeout: timeout, Interval: 10 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess := &fakeSession{ctx: ctx, marker: &recordingMarker{}}
	if err := b.Setup(sess); err != nil {
		t.Fatal(err)
	}
	claim := newFakeClaim(t, 0, 2)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		if err := b.ConsumeClaim(sess, claim); err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, "record 1 waiting for the credit record 0 holds", func() bool {
		ps := b.Partitions()
		return len(ps) == 1 && !ps[0].WaitingForCredit.IsZero()
	})
	confirms.Store(false)
	time.Sleep(2 * timeout) // the lease lapses a session timeout after the last yes
	close(release)
	waitFor(t, "record 0 handled and record 1 waiting for the lease", func() bool {
		ps := b.Partitions()
		return handled.Load() == 1 && len(ps) == 1 && !ps[0].Unconfirmed.IsZero()
	})
	if ps := b.Partitions(); ps[0].InFlight != 0 || handled.Load() != 1 {
		t.Fatalf("in flight %d, handled %d: record 1 was admitted after the lapse", ps[0].InFlight, handled.Load())
	}
	// A revoke while it waits: the claim ends, record 1 never admitted.
	claim.close()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("a revoke did not end the claim waiting for its lease")
	}
	if got := handled.Load(); got != 1 {
		t.Fatalf("handled %d records; record 1 was admitted without a confirmation", got)
	}
	if err := b.Cleanup(sess); err != nil {
		t.Fatal(err)
	}
}

// A lease that could not work is refused when the bridge is made.
func TestNewBridgeRefusesAnUnusableLease(t *testing.T) {
	ok := func(context.Context, int32, string) error { return nil }
	for name, l := range map[string]actors.LeaseConfig{
		"no check":                  {SessionTimeout: time.Second, Interval: 100 * time.Millisecond},
		"no session timeout":        {Check: ok, Interval: 100 * time.Millisecond},
		"no interval":               {Check: ok, SessionTimeout: time.Second},
		"interval past the timeout": {Check: ok, SessionTimeout: time.Second, Interval: time.Second},
	} {
		_, err := actors.NewBridge(actors.BridgeConfig{
			System: newTestSystem(t), Settings: testSettings(ordering.Unordered),
			Handler:     actors.HandlerFunc(func(context.Context, *messages.Record) error { return nil }),
			DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
			Lease:       &l,
		})
		if err == nil {
			t.Errorf("%s: NewBridge accepted it", name)
		}
	}
}
