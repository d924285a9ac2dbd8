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

// checkCredits fails the test unless the bridge's credit book balances:
// nothing held once every claim has ended (available + held = G), and no
// credit was ever given back twice.
func checkCredits(t *testing.T, b *actors.Bridge) {
	t.Helper()
	c := b.Credits()
	if c.Held != 0 || c.HeldByClaims != 0 {
		t.Fatalf("credits held after every claim ended: %+v (available %d of %d)", c, c.Limit-c.Held, c.Limit)
	}
	if s := b.Stats().Snapshot(); s.CreditErrors != 0 || s.RefusedFinishes != 0 {
		t.Fatalf("accounting faults: %d credit errors, %d refused finishes", s.CreditErrors, s.RefusedFinishes)
	}
}

// A cooperative revoke closes the claim while the session lives on. With
// every partition credit held by a record that does not finish, the bridge
// waits for a credit with the next record in hand; the revoke must still
// start the drain at once, and the claim return within the drain timeout.
// Also for a claim without Errors() (a test double), whose end the credit
// wait sees only through the read-ahead.
func TestBridgeRevokeWhileStarvedOfCredits(t *testing.T) {
	for _, hideErrors := range []bool{false, true} {
		t.Run(fmt.Sprintf("without Errors() %v", hideErrors), func(t *testing.T) {
			s := testSettings(ordering.Unordered)
			s.InFlightPerPartition = 1
			s.DrainTimeout = 300 * time.Millisecond
			h := &gatedHandler{release: make(chan struct{}), honourCtx: true}
			b := newTestBridge(t, s, h)
			marker := &recordingMarker{}
			sess := &fakeSession{ctx: context.Background(), marker: marker} // the session outlives the claim
			fc := newFakeClaim(t, 0, 10)
			var claim sarama.ConsumerGroupClaim = fc
			if hideErrors {
				claim = struct{ sarama.ConsumerGroupClaim }{fc} // embedding the interface hides Errors()
			}

			returned := make(chan struct{})
			go func() {
				defer close(returned)
				if err := b.ConsumeClaim(sess, claim); err != nil {
					t.Error(err)
				}
			}()
			waitFor(t, "the bridge to wait for a credit", func() bool {
				ps := b.Partitions()
				return len(ps) == 1 && !ps[0].WaitingForCredit.IsZero() && ps[0].InFlight == 1
			})
			revoked := time.Now()
			fc.close() // eight records still read ahead in front of the close
			select {
			case <-returned:
			case <-time.After(s.DrainTimeout + 3*time.Second):
				t.Fatal("ConsumeClaim did not return after the revoke: the bridge missed it while starved")
			}
			if took := time.Since(revoked); took > s.DrainTimeout+500*time.Millisecond {
				t.Fatalf("the revoked claim took %v to return with a %v drain timeout", took, s.DrainTimeout)
			}
			if got := marker.get(0); got > 0 {
				t.Fatalf("marked %d although offset 0 never finished", got)
			}
			if st := b.Stats().Snapshot(); st.Admitted != 1 || st.Abandoned != 1 {
				t.Fatalf("stats %+v; want 1 admitted and abandoned", st)
			}
			checkCredits(t, b)
		})
	}
}

// panicOnMark makes the partition actor fail at its first mark.
type panicOnMark struct{ inner actors.OffsetMarker }

func (p panicOnMark) MarkOffset(string, int32, int64, string)  { panic("marker broke") }
func (p panicOnMark) ResetOffset(string, int32, int64, string) { panic("marker broke") }

// A partition actor that dies takes the records in its mailbox with it;
// their credits must still come back, or the rest of the process starves.
// After the dead claim, a second claim gets every process credit.
func TestBridgeCreditsComeBackWhenPartitionActorDies(t *testing.T) {
	s := testSettings(ordering.Unordered)
	s.InFlightPerPartition = 8
	s.InFlightTotal = 8
	var handled atomic.Int64
	h := actors.HandlerFunc(func(ctx context.Context, r *messages.Record) error {
		handled.Add(1)
		return nil
	})
	system := newTestSystem(t)
	var claimNo atomic.Int64
	b, err := actors.NewBridge(actors.BridgeConfig{
		System: system, Settings: s, Handler: h,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		WrapMarker: func(m actors.OffsetMarker) actors.OffsetMarker {
			if claimNo.Add(1) == 1 {
				return panicOnMark{m} // the first claim's actor dies at its first mark
			}
			return m
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	marker := &recordingMarker{}
	sess := &fakeSession{ctx: context.Background(), marker: marker}

	dying := newFakeClaim(t, 0, 100)
	if err := b.ConsumeClaim(sess, dying); err != nil {
		t.Fatal(err)
	}
	checkCredits(t, b)

	// the rest of the process is not starved: a new claim runs to its end
	healthy := newFakeClaim(t, 1, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.ConsumeClaim(sess, healthy)
	}()
	waitFor(t, "the healthy claim's records", func() bool { return marker.get(1) == 100 })
	healthy.close()
	<-done
	checkCredits(t, b)
}

// lateMarker is a ClaimWorker that marks after its drain returned, as a
// partition actor would whose drain reply was lost to a timeout.
type lateMarker struct {
	cfg     actors.PartitionConfig
	stopped chan struct{}
	once    sync.Once
}

func (w *lateMarker) Admit(r *messages.Record) { w.cfg.Release(1, actors.WireBytes(r)) }
func (w *lateMarker) Stopped() <-chan struct{} {
	return w.stopped
}
func (w *lateMarker) Drain(time.Duration) (*messages.DrainResult, error) {
	w.once.Do(func() { close(w.stopped) })
	return &messages.DrainResult{Watermark: -1}, nil
}

// The bridge fences its marker when the claim ends: a mark made after
// ConsumeClaim returned never reaches the session, whose partition another
// member may own by then.
func TestBridgeFencesMarksAfterClaimEnded(t *testing.T) {
	var worker *lateMarker
	settings := testSettings(ordering.Unordered)
	settings.Concurrency = actors.ConcurrencyFixed // no actor system: no adaptive limit
	b, err := actors.NewBridge(actors.BridgeConfig{
		Settings: settings, Handler: actors.HandlerFunc(func(context.Context, *messages.Record) error { return nil }),
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
		NewWorker: func(cfg actors.PartitionConfig) (actors.ClaimWorker, error) {
			worker = &lateMarker{cfg: cfg, stopped: make(chan struct{})}
			return worker, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	marker := &recordingMarker{}
	sess := &fakeSession{ctx: context.Background(), marker: marker}
	claim := newFakeClaim(t, 0, 3)
	claim.close()
	if err := b.ConsumeClaim(sess, claim); err != nil {
		t.Fatal(err)
	}
	worker.cfg.Marker.MarkOffset("events", 0, 3, "")
	if got := marker.get(0); got != -1 {
		t.Fatalf("a mark made after ConsumeClaim returned reached the session: %d", got)
	}
	checkCredits(t, b)
}

// A consumer error reported through the group (RunMember passes them on)
// marks the claim's fetch as troubled, so it cannot read as idle.
func TestBridgeRecordsFetchErrorsOfItsClaims(t *testing.T) {
	b := newTestBridge(t, testSettings(ordering.Unordered), actors.HandlerFunc(func(context.Context, *messages.Record) error { return nil }))
	claim := newFakeClaim(t, 2, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.ConsumeClaim(&fakeSession{ctx: context.Background(), marker: &recordingMarker{}}, claim)
	}()
	waitFor(t, "the claim", func() bool { return len(b.Partitions()) == 1 })
	before := time.Now()
	b.FetchError("events", 3, errors.New("broken")) // another partition: not this claim's
	if got := b.Partitions()[0].LastFetchError; !got.IsZero() {
		t.Fatalf("another partition's error recorded on this claim at %v", got)
	}
	b.FetchError("events", 2, errors.New("broken"))
	if got := b.Partitions()[0].LastFetchError; got.Before(before) {
		t.Fatalf("fetch error not recorded: %v", got)
	}
	claim.close()
	<-done
}
