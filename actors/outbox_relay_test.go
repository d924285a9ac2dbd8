package actors_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// memOutbox is an outbox in memory with the store's claim rule: a claim
// takes the oldest messages' keys not held by another claim, and their
// messages in id order.
type memOutbox struct {
	mu      sync.Mutex
	msgs    []messages.OutboxMessage
	held    map[string]bool
	claims  int
	lastID  int64
	refused []messages.OutboxMessage // kept aside
}

func (o *memOutbox) add(kind messages.OutboxKind, key string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for range n {
		o.lastID++ // never reused, as a sequence's: ids told apart across the whole test
		id := o.lastID
		o.msgs = append(o.msgs, messages.OutboxMessage{ID: id, Kind: kind, OrderingKey: key, EventID: string(rune('a' + id%26))})
	}
}

func (o *memOutbox) Claim(_ context.Context, max int, exclude []messages.OutboxKind) ([]messages.OutboxMessage, func(context.Context, messages.OutboxOutcome) error, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.claims++
	if o.held == nil {
		o.held = map[string]bool{}
	}
	keys := map[string]bool{}
	var out []messages.OutboxMessage
	for _, m := range o.msgs {
		if len(out) >= max || slices.Contains(exclude, m.Kind) {
			continue
		}
		if !keys[m.OrderingKey] && o.held[m.OrderingKey] {
			continue
		}
		keys[m.OrderingKey] = true
		out = append(out, m)
	}
	for k := range keys {
		o.held[k] = true
	}
	return out, func(_ context.Context, outcome messages.OutboxOutcome) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.msgs = slices.DeleteFunc(o.msgs, func(m messages.OutboxMessage) bool {
			_, refused := outcome.Refused[m.ID]
			if refused {
				o.refused = append(o.refused, m)
			}
			return refused || slices.Contains(outcome.Published, m.ID)
		})
		for k := range keys {
			delete(o.held, k)
		}
		return nil
	}, nil
}

func (o *memOutbox) Backlog(context.Context) (messages.OutboxBacklog, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return messages.OutboxBacklog{Pending: int64(len(o.msgs))}, nil
}

func (o *memOutbox) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.msgs)
}

// logPublisher records what it publishes; refuse, when set, refuses a
// message (before it is recorded).
type logPublisher struct {
	mu     sync.Mutex
	log    []messages.OutboxMessage
	refuse func(messages.OutboxMessage) bool
	err    error // the refusal's error; nil: "refused"
}

func (p *logPublisher) Publish(msgs []messages.OutboxMessage) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if p.refuse != nil && p.refuse(m) {
			errs[i] = p.err
			if errs[i] == nil {
				errs[i] = errors.New("refused")
			}
			continue
		}
		p.log = append(p.log, m)
	}
	return errs
}

func (p *logPublisher) published() []messages.OutboxMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.log)
}

// lastCopiesInOrder reports whether, keeping each message's last copy in
// the log, every key's messages come in id order.
func lastCopiesInOrder(t *testing.T, log []messages.OutboxMessage) {
	t.Helper()
	last := map[int64]int{}
	for i, m := range log {
		last[m.ID] = i
	}
	prev := map[string]int64{}
	for i, m := range log {
		if last[m.ID] != i {
			continue
		}
		if p, ok := prev[m.OrderingKey]; ok && p > m.ID {
			t.Fatalf("key %s: message %d's last copy after %d's", m.OrderingKey, p, m.ID)
		}
		prev[m.OrderingKey] = m.ID
	}
}

func startRelay(t *testing.T, o *memOutbox, p *logPublisher, batch int, kindBackoff time.Duration) *actors.Relay {
	t.Helper()
	return startRelayWith(t, actors.RelayConfig{Store: o, Publisher: p, Interval: 10 * time.Millisecond, Batch: batch, KindBackoff: kindBackoff})
}

// startRelayWith starts a relay of cfg in an actor system of its own, shut
// down when the test ends.
func startRelayWith(t *testing.T, cfg actors.RelayConfig) *actors.Relay {
	t.Helper()
	system := actors.NewActorSystem(discardLogger())
	r, err := actors.StartRelay(system, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(system.Shutdown)
	return r
}

// Stop publishes what waits, in several rounds when it does not fit one,
// each key in order, and deletes what was published.
func TestRelayPublishesEveryKeyInOrderAndDrainsOnStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), protoactorThrottle)
	o, p := &memOutbox{}, &logPublisher{}
	for _, k := range []string{"host-1", "host-2", "host-3"} {
		o.add(messages.OutboxPayloadStatus, k, 7)
	}
	r := startRelay(t, o, p, 4, time.Hour)
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := o.pending(); n != 0 {
		t.Fatalf("%d messages left in the outbox after Stop", n)
	}
	log := p.published()
	if len(log) != 21 {
		t.Fatalf("published %d messages, want 21", len(log))
	}
	lastCopiesInOrder(t, log)
	if s := r.State(); s.Published != 21 || s.Rounds < 6 {
		t.Fatalf("state %+v: want 21 published over at least 6 rounds of 4", s)
	}
}

// A refused message keeps itself and every later one of its key in the
// outbox (published again later); the other keys go on.
func TestRelayKeepsARefusedKeysRestForLater(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), protoactorThrottle)
	o := &memOutbox{}
	o.add(messages.OutboxPayloadStatus, "host-1", 3) // ids 1..3
	o.add(messages.OutboxPayloadStatus, "host-2", 2) // ids 4..5
	refusals := 1
	p := &logPublisher{refuse: func(m messages.OutboxMessage) bool {
		if m.ID == 2 && refusals > 0 {
			refusals--
			return true
		}
		return false
	}}
	r := startRelay(t, o, p, 10, 10*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for o.pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	log := p.published()
	lastCopiesInOrder(t, log)
	var ids []int64
	for _, m := range log {
		ids = append(ids, m.ID)
	}
	// The first round: 1, 3 (acknowledged, kept: after the refused 2), 4, 5;
	// a later one: 2, 3 again.
	if want := []int64{1, 3, 4, 5, 2, 3}; !slices.Equal(ids, want) {
		t.Fatalf("published %v, want %v", ids, want)
	}
	if n := o.pending(); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

// A kind whose topic refuses is left out of the rounds, so it does not
// hold the others behind it: here every notification is older than the
// payload statuses and more than a batch.
func TestRelayLeavesARefusedKindOut(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), protoactorThrottle)
	o := &memOutbox{}
	o.add(messages.OutboxNotification, "org-1", 5)
	o.add(messages.OutboxNotification, "org-2", 5)
	o.add(messages.OutboxPayloadStatus, "host-1", 3)
	p := &logPublisher{refuse: func(m messages.OutboxMessage) bool { return m.Kind == messages.OutboxNotification }}
	r := startRelay(t, o, p, 4, time.Hour)
	deadline := time.Now().Add(5 * time.Second)
	for len(p.published()) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	_ = r.Stop(context.Background())
	if got := len(p.published()); got != 3 {
		t.Fatalf("published %d payload statuses behind the refused notifications, want 3", got)
	}
	if s := r.State(); !slices.Contains(s.HeldKinds, messages.OutboxNotification) || s.LastError == "" && s.Failed == 0 {
		t.Fatalf("state %+v: want notifications held and the refusal counted", s)
	}
	if n := o.pending(); n != 10 {
		t.Fatalf("%d left, want the 10 notifications", n)
	}
}

// protoactorThrottle is the library goroutine TestMain ignores too: a wake
// reaching the stopped relay starts the dead-letter log's one-shot throttle.
var protoactorThrottle = goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")
