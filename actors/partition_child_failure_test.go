package actors

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/messages"
)

// stubSupervisor is the supervisor HandleFailure is handed; it stops
// nothing.
type stubSupervisor struct{}

func (stubSupervisor) Children() []*actor.PID        { return nil }
func (stubSupervisor) EscalateFailure(any, any)      {}
func (stubSupervisor) RestartChildren(...*actor.PID) {}
func (stubSupervisor) StopChildren(...*actor.PID)    {}
func (stubSupervisor) ResumeChildren(...*actor.PID)  {}

// Children reuse the names of stopped ones, so for a moment two records
// can hold children with the same id: a child that panicked has
// terminated, its name was handed to the next record's child, and its own
// record has not yet seen the failure HandleFailure queued for it. A child
// failing outside its record's message is found by the child itself, not
// by its id: found by id, the failure of the new child was charged, in
// map order, to the record of the old one, and the new child's record was
// never answered (its drain timed out; a reviewer's scratch test, 3 runs
// in 12 on 2132a7b).
func TestAChildsFailureIsChargedToItsOwnRecordWhenNamesRepeat(t *testing.T) {
	for i := range 10 { // the old lookup picked either record, in map order
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var calls [2]atomic.Int64
			release := make(chan struct{})
			h := HandlerFunc(func(ctx context.Context, r *messages.Record) error {
				if calls[r.GetOffset()].Add(1) == 1 {
					select {
					case <-release:
					case <-ctx.Done():
					}
				}
				return nil
			})
			f := newAccountingFixture(t, h, DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }))
			defer close(release)
			f.admit(0, "x")
			f.admit(1, "z")
			waitUntil(t, "both records running", func() bool { return calls[0].Load() == 1 && calls[1].Load() == 1 })
			f.system.Root.Send(f.pid, poke(func(a *PartitionActor) {
				z := a.records[1].child
				// The record of offset 0 still holds its stopped child, whose
				// name the child of offset 1 now runs under.
				a.records[0].child = &actor.PID{Address: z.GetAddress(), Id: z.GetId()}
				a.HandleFailure(a.system, stubSupervisor{}, z, nil, "broke outside its record's message", nil)
			}))
			waitUntil(t, "one record retried", func() bool { return calls[0].Load()+calls[1].Load() == 3 })
			if calls[1].Load() != 2 {
				t.Fatalf("the failure of offset 1's child retried offset 0 (calls %d, %d)", calls[0].Load(), calls[1].Load())
			}
		})
	}
}
