package actors_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// A claim revoked while the bridge reads its commit metadata (a slow
// coordinator: the read would take its whole 5 s bound) returns within the
// drain timeout and a small grace, not after the read: the read ends with
// the claim. Nothing is admitted or marked for the revoked claim. Also for
// a claim without Errors(), whose end only its Messages() closing shows.
func TestRevokeDuringTheCommittedReadEndsTheClaimAtOnce(t *testing.T) {
	for _, hideErrors := range []bool{false, true} {
		t.Run(fmt.Sprintf("without Errors() %v", hideErrors), func(t *testing.T) {
			s := testSettings(ordering.ByKey)
			s.DrainTimeout = 200 * time.Millisecond
			var handled atomic.Int64
			reading := make(chan struct{})
			b, err := actors.NewBridge(actors.BridgeConfig{
				System: newTestSystem(t), Settings: s,
				Handler:     actors.HandlerFunc(func(context.Context, *messages.Record) error { handled.Add(1); return nil }),
				DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }),
				Committed: func(ctx context.Context, topic string, partition int32) (actors.Committed, error) {
					close(reading)
					<-ctx.Done() // a coordinator that does not answer
					return actors.Committed{}, ctx.Err()
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Close)
			marker := &recordingMarker{}
			sess := &fakeSession{ctx: context.Background(), marker: marker} // a cooperative revoke: the session lives on
			fc := newFakeClaim(t, 0, 5)
			var claim sarama.ConsumerGroupClaim = fc
			if hideErrors {
				claim = struct{ sarama.ConsumerGroupClaim }{fc}
			}
			returned := make(chan struct{})
			go func() {
				defer close(returned)
				if err := b.ConsumeClaim(sess, claim); err != nil {
					t.Error(err)
				}
			}()
			<-reading
			revoked := time.Now()
			fc.close()
			select {
			case <-returned:
			case <-time.After(10 * time.Second):
				t.Fatal("ConsumeClaim did not return after the revoke")
			}
			if took := time.Since(revoked); took > s.DrainTimeout+time.Second {
				t.Fatalf("revoked during the metadata read, the claim took %v to return (drain timeout %v): the read held it", took, s.DrainTimeout)
			}
			if got := marker.get(0); got > 0 || handled.Load() != 0 {
				t.Fatalf("the revoked claim marked %d and handled %d records", got, handled.Load())
			}
			checkCredits(t, b)
		})
	}
}
