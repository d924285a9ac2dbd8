package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// weighedHandler weighs each record what weigh says, fails the records bad
// names with an error of no class (judged by how the other records fare),
// and handles every other record in a few milliseconds.
type weighedHandler struct {
	weigh func(p int32, off int64) int64
	bad   func(p int32, off int64) bool

	mu       sync.Mutex
	attempts map[[2]int64]int
	done     map[[2]int64]bool
	// running and peak are the weights of the records in Handle now, and
	// at most.
	running, peak int64
}

func newWeighedHandler(weigh func(int32, int64) int64, bad func(int32, int64) bool) *weighedHandler {
	return &weighedHandler{weigh: weigh, bad: bad, attempts: map[[2]int64]int{}, done: map[[2]int64]bool{}}
}

func (h *weighedHandler) RecordBytes(r *messages.Record) int64 {
	return h.weigh(r.GetPartition(), r.GetOffset())
}

func (h *weighedHandler) Handle(ctx context.Context, r *messages.Record) error {
	k := [2]int64{int64(r.GetPartition()), r.GetOffset()}
	w := h.weigh(r.GetPartition(), r.GetOffset())
	h.mu.Lock()
	h.attempts[k]++
	h.running += w
	h.peak = max(h.peak, h.running)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running -= w
		h.mu.Unlock()
	}()
	if h.bad(r.GetPartition(), r.GetOffset()) {
		return errors.New("this record breaks the handler")
	}
	select {
	case <-time.After(2 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	h.mu.Lock()
	h.done[k] = true
	h.mu.Unlock()
	return nil
}

func (h *weighedHandler) attemptsOf(p int32, off int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.attempts[[2]int64{int64(p), off}]
}

// deadLetterLog records the offsets dead-lettered, by partition.
type deadLetterLog struct {
	mu   sync.Mutex
	dead map[[2]int64]bool
}

func (d *deadLetterLog) Write(_ context.Context, l *messages.DeadLetter) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead == nil {
		d.dead = map[[2]int64]bool{}
	}
	d.dead[[2]int64{int64(l.GetOriginalPartition()), l.GetOriginalOffset()}] = true
	return nil
}

func (d *deadLetterLog) has(p int32, off int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dead[[2]int64{int64(p), off}]
}

// openClaim is a claim the test feeds as it goes.
func openClaim(t *testing.T, partition int32) *fakeClaim {
	c := &fakeClaim{partition: partition, msgs: make(chan *sarama.ConsumerMessage, 4096), errs: make(chan *sarama.ConsumerError)}
	t.Cleanup(c.close)
	return c
}

func (c *fakeClaim) push(from, to int64) {
	for off := from; off < to; off++ {
		c.msgs <- &sarama.ConsumerMessage{Topic: "events", Partition: c.partition, Offset: off, Key: fmt.Appendf(nil, "host-%d-%d", c.partition, off)}
	}
}

type evidenceBridge struct {
	b      *actors.Bridge
	h      *weighedHandler
	dead   *deadLetterLog
	marker *recordingMarker
	sess   *fakeSession
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

func startEvidenceBridge(t *testing.T, s actors.Settings, h *weighedHandler) *evidenceBridge {
	t.Helper()
	e := &evidenceBridge{h: h, dead: &deadLetterLog{}, marker: &recordingMarker{}}
	b, err := actors.NewBridge(actors.BridgeConfig{System: newTestSystem(t), Settings: s, Handler: h, DeadLetters: e.dead})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	e.b = b
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.sess = &fakeSession{ctx: ctx, marker: e.marker}
	t.Cleanup(func() {
		cancel()
		e.wg.Wait()
	})
	return e
}

func (e *evidenceBridge) consume(t *testing.T, c *fakeClaim) {
	e.wg.Go(func() {
		if err := e.b.ConsumeClaim(e.sess, c); err != nil {
			t.Error(err)
		}
	})
}

// waitDeadLettered waits for offset off of partition p to be dead-lettered
// and every partition in parts to be committed up to its end.
func (e *evidenceBridge) waitDeadLettered(t *testing.T, p int32, off int64, within time.Duration, ends map[int32]int64) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !e.dead.has(p, off) {
		if time.Now().After(deadline) {
			st := e.b.Stats().Snapshot()
			t.Fatalf("offset %d of partition %d not dead-lettered within %v: %d attempts, verdicts own %d, held %d, shared %d; bytes in flight %d of %d, admitted %d",
				off, p, within, e.h.attemptsOf(p, off), st.RetriedOwn, st.RetriedHeld, st.RetriedShared,
				e.b.Credits().Bytes, e.b.Credits().BytesLimit, st.Admitted)
		}
		time.Sleep(2 * time.Millisecond)
	}
	for q, end := range ends {
		waitFor(t, fmt.Sprintf("partition %d committed to %d", q, end), func() bool { return e.marker.get(q) == end })
	}
}

// A record that fails on its own, heavier than the whole byte budget, is
// charged all of it (it "runs alone") and keeps it between its attempts.
// Its failures name no dependency, so they are judged by how the other
// records fare just after them (package blame); but no other record of the
// process can be admitted while it holds the budget. Nothing is heard, the
// verdict is NoEvidence, the record is held and retried for ever, and every
// partition of the process stops with it. Without the byte budget the
// others run and it is dead-lettered within Settings.OwnFailureBound.
func TestByteBudgetLeavesRoomForEvidenceOfAHeavyRecord(t *testing.T) {
	for _, budget := range []int64{0, 1000} {
		t.Run(fmt.Sprintf("budget %d", budget), func(t *testing.T) {
			s := shapeSettings(ordering.ByKey)
			s.InFlightBytes = budget
			h := newWeighedHandler(func(p int32, off int64) int64 {
				if p == 0 && off == 0 {
					return 5000
				}
				return 100
			}, func(p int32, off int64) bool { return p == 0 && off == 0 })
			e := startEvidenceBridge(t, s, h)
			p0 := openClaim(t, 0)
			p0.push(0, 1)
			e.consume(t, p0)
			waitFor(t, "the heavy record's first attempt", func() bool { return h.attemptsOf(0, 0) > 0 })
			p0.push(1, 40)
			p1 := openClaim(t, 1)
			p1.push(0, 400)
			e.consume(t, p1)
			e.waitDeadLettered(t, 0, 0, s.OwnFailureBound()+3*time.Second, map[int32]int64{0: 40, 1: 400})
		})
	}
}

// The same with a record that fits the budget: it holds 300 of 1,000 bytes
// while it waits for evidence, and the next record of another partition
// weighs 800. That one waits for room at the head of the budget's queue
// (first come, first served), and every record after it, of any partition,
// queues behind it, though 700 bytes are free: the failing record's
// evidence cannot be admitted, so it is held for ever, and the record at
// the head waits for ever for the bytes it holds.
func TestByteBudgetLeavesRoomForEvidenceBehindAHeavyWaiter(t *testing.T) {
	for _, budget := range []int64{0, 1000} {
		t.Run(fmt.Sprintf("budget %d", budget), func(t *testing.T) {
			s := shapeSettings(ordering.ByKey)
			s.InFlightBytes = budget
			h := newWeighedHandler(func(p int32, off int64) int64 {
				switch {
				case p == 0 && off == 0:
					return 300
				case p == 1 && off == 0:
					return 800
				}
				return 100
			}, func(p int32, off int64) bool { return p == 0 && off == 0 })
			e := startEvidenceBridge(t, s, h)
			p0 := openClaim(t, 0)
			p0.push(0, 1)
			e.consume(t, p0)
			waitFor(t, "the failing record's first attempt", func() bool { return h.attemptsOf(0, 0) > 0 })
			p1 := openClaim(t, 1)
			p1.push(0, 1)
			e.consume(t, p1)
			if budget > 0 {
				waitFor(t, "the heavy record to wait for room (or to run)", func() bool {
					if h.attemptsOf(1, 0) > 0 {
						return true
					}
					for _, c := range e.b.Partitions() {
						if c.Partition == 1 && !c.WaitingForCredit.IsZero() {
							return true
						}
					}
					return false
				})
			}
			p0.push(1, 40)
			p1.push(1, 400)
			e.waitDeadLettered(t, 0, 0, s.OwnFailureBound()+3*time.Second, map[int32]int64{0: 40, 1: 400})
			h.mu.Lock()
			peak := h.peak
			h.mu.Unlock()
			if budget > 0 && peak > 2*budget {
				t.Fatalf("records weighing %d ran at once; the budget is %d, and records waiting for evidence lend at most as much again", peak, budget)
			}
		})
	}
}

var _ actors.RecordSizer = (*weighedHandler)(nil)

// The failing record's own key holds the rest of what it does not lend:
// records of its key (of its partition, in partition order) wait in the
// gate behind it, charged and idle, so the room it lends is less than the
// next record of another partition needs, which waits at the head of the
// queue with every record after it: no evidence again. They cannot run
// before it, so they lend their bytes with it.
func TestByteBudgetLeavesRoomForEvidenceBehindItsOwnKey(t *testing.T) {
	for _, mode := range []ordering.Mode{ordering.ByKey, ordering.ByPartition} {
		t.Run(mode.String(), func(t *testing.T) {
			s := shapeSettings(mode)
			s.InFlightBytes = 1000
			h := newWeighedHandler(func(p int32, off int64) int64 {
				switch {
				case p == 0:
					return 300
				case p == 1 && off == 0:
					return 800
				}
				return 100
			}, func(p int32, off int64) bool { return p == 0 && off == 0 })
			e := startEvidenceBridge(t, s, h)
			p0 := openClaim(t, 0)
			for off := int64(0); off < 3; off++ { // one host's events: one key
				p0.msgs <- &sarama.ConsumerMessage{Topic: "events", Partition: 0, Offset: off, Key: []byte("host")}
			}
			e.consume(t, p0)
			waitFor(t, "the failing record's first attempt, its key's records admitted", func() bool {
				return h.attemptsOf(0, 0) > 0 && e.b.Stats().Snapshot().Admitted == 3
			})
			p1 := openClaim(t, 1)
			p1.push(0, 400)
			e.consume(t, p1)
			e.waitDeadLettered(t, 0, 0, s.OwnFailureBound()+3*time.Second, map[int32]int64{0: 3, 1: 400})
		})
	}
}
