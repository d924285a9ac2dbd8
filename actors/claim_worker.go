package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/patchflow/patchflow/messages"
)

// ClaimWorker does the work of one claimed partition for the Bridge: it
// takes admitted records, finishes them, marks offsets and drains at the end
// of the claim. The production worker is the PartitionActor
// (BridgeConfig.NewWorker left nil); the benchmark supplies a plain
// goroutine pool behind the same bridge to measure what the actors cost.
type ClaimWorker interface {
	// Admit hands over one record. The bridge holds one partition credit and
	// one process credit for it; the worker gives them back through
	// PartitionConfig.Release once the record is finished or abandoned. What
	// it has not given back when Drain returns, the bridge gives back itself.
	Admit(record *messages.Record)
	// Drain ends the claim: no more records start, running ones get at most
	// timeout, the final watermark is marked. It returns once the worker has
	// stopped marking, or with an error when the worker did not answer.
	Drain(timeout time.Duration) (*messages.DrainResult, error)
	// Stopped closes when the worker can take no more records.
	Stopped() <-chan struct{}
}

// unreadableWorker is a ClaimWorker that takes offsets no fetch can read
// (BridgeConfig.Unreadable): AdmitUnreadable hands one over, as Admit
// hands a record, credits included; the worker dead-letters it by offset
// and finishes it like a record.
type unreadableWorker interface {
	AdmitUnreadable(offset int64, limit int)
}

// actorWorker runs a claim as a spawned PartitionActor.
type actorWorker struct {
	system *actor.ActorSystem
	pid    *actor.PID
	pa     *PartitionActor
}

// spawnPartitionActor is the default BridgeConfig.NewWorker.
func spawnPartitionActor(system *actor.ActorSystem, cfg PartitionConfig) (*actorWorker, error) {
	pa := NewPartitionActor(cfg)
	name := partitionActorName(cfg)
	pid, err := system.Root.SpawnNamed(pa.Props(), name)
	if err != nil {
		// Never started, so never stopping: what it holds goes now.
		pa.cancelRun()
		pa.dispatcher.close()
		return nil, err
	}
	return &actorWorker{system: system, pid: pid, pa: pa}, nil
}

func partitionActorName(cfg PartitionConfig) string {
	return fmt.Sprintf("partition-%s-%d-g%d-e%d", cfg.Topic, cfg.Partition, cfg.Generation, cfg.Epoch)
}

// Admit implements ClaimWorker.
func (w *actorWorker) Admit(r *messages.Record) {
	w.system.Root.Send(w.pid, &messages.RecordAdmitted{Record: r})
}

// AdmitUnreadable implements unreadableWorker.
func (w *actorWorker) AdmitUnreadable(offset int64, limit int) {
	w.system.Root.Send(w.pid, &unreadableAdmitted{offset: offset, limit: limit})
}

// errWorkerStopped answers a drain of an actor that has already stopped
// (it failed): there is nothing to drain and nothing more to mark.
var errWorkerStopped = errors.New("the partition actor had already stopped")

// Drain implements ClaimWorker. The actor answers right at its deadline, so
// drainGrace only matters when it has failed; then it is stopped.
func (w *actorWorker) Drain(timeout time.Duration) (*messages.DrainResult, error) {
	if isClosed(w.pa.Stopped()) {
		return nil, errWorkerStopped
	}
	res, err := w.system.Root.RequestFuture(w.pid, &messages.Drain{Timeout: durationpb.New(timeout)}, timeout+drainGrace).Result()
	if err != nil {
		w.system.Root.Stop(w.pid)
		return nil, err
	}
	r, _ := res.(*messages.DrainResult)
	return r, nil
}

// releaseTimeout bounds an operator's release request to the actor.
const releaseTimeout = 5 * time.Second

// release asks the actor to give up on the record at offset.
func (w *actorWorker) release(offset int64) (*ReleaseResult, error) {
	res, err := w.system.Root.RequestFuture(w.pid, &ReleaseRecord{Offset: offset}, releaseTimeout).Result()
	if err != nil {
		return nil, fmt.Errorf("release offset %d: the partition actor did not answer: %w", offset, err)
	}
	r, _ := res.(*ReleaseResult)
	return r, nil
}

// Stopped implements ClaimWorker.
func (w *actorWorker) Stopped() <-chan struct{} { return w.pa.Stopped() }
