package actors

// OutboxRelay protocol
//
//	in  relayWake        from Relay's ticker, the store's LISTEN, Relay.Wake (a commit of this process): claim a batch, once the linger since the last round's start has passed
//	in  relayLingerEnd   from the linger's timer: the wake it held starts its round
//	in  relayRoundDone   from the round's goroutine: what it published, whether the outbox may hold more
//	in  relayBacklog     from the backlog goroutine: pending messages and the oldest one's age
//	in  relayDrain       from Relay.Stop: publish what waits (always one round begun after it), then answer on done
//	in  *actor.Stopped   closes stopped: Relay.Stop then waits for the round and the backlog read in flight
//	out OutboxStore.Claim / OutboxPublisher.Publish / finish, from one round goroutine at a time
//	out RelayState       published for /status and metrics (Relay.State)
//
// One OutboxRelay lives per process, beside the partition actors: it
// publishes what the records' transactions wrote to the outbox. A round
// claims up to Batch of the oldest messages whose keys no other relay holds
// (the store holds their ordering keys from other relays until the round
// ends), publishes them, and deletes
// those the broker acknowledged; the actor runs one round at a time, and
// wakes for the next on a notification, on its timer, or at once when the
// round was full. A wake within Linger of the last round's start waits for
// the linger to end, so that one round publishes what several commits
// wrote. The actor owns the round's schedule and the backoff of a
// kind whose topic refuses it; the store and the producer do the I/O.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/patchflow/patchflow/messages"
)

// OutboxStore is where the relay reads the outbox (persistence.Outbox).
type OutboxStore interface {
	// Claim takes up to max of the oldest messages not of the kinds
	// exclude, each ordering key's in id order, held from other relays
	// until finish; finish deletes the outcome's published messages, keeps
	// its refused ones aside, and ends the claim; it is called once
	// whenever Claim returned no error.
	Claim(ctx context.Context, max int, exclude []messages.OutboxKind) ([]messages.OutboxMessage, func(ctx context.Context, outcome messages.OutboxOutcome) error, error)
	Backlog(ctx context.Context) (messages.OutboxBacklog, error)
}

// OutboxPublisher publishes outbox messages (KafkaOutboxPublisher).
type OutboxPublisher interface {
	// Publish sends msgs and returns, for each, nil once the broker
	// acknowledged it or the reason it did not. It returns only when every
	// message has its answer, so that no message of a round is still on
	// its way when the round's keys are released.
	Publish(msgs []messages.OutboxMessage) []error
}

// RelayConfig is what a Relay needs.
type RelayConfig struct {
	Store     OutboxStore
	Publisher OutboxPublisher
	// Wake, when set, receives a value when the outbox was written
	// (persistence.Outbox.Listen).
	Wake <-chan struct{}
	// Interval is the timer: a round at least this often (0: 1 s), and the
	// backlog read this often.
	Interval time.Duration
	// Batch is the most messages one round claims (0: 500).
	Batch int
	// Linger is the least time between the starts of two rounds that a
	// wake asks for (0: none): a wake sooner waits for it, and the rounds
	// of a steady flow carry what commits wrote meanwhile. Each round
	// costs a transaction with its commit and a produce request per topic
	// whatever it carries, so under load back-to-back rounds of a few
	// messages cost the database and the broker more per message than
	// rounds a linger apart. A round after a full one, and a drain's,
	// never wait.
	Linger time.Duration
	// KindBackoff is how long a kind whose topic refused a message is left
	// out of the rounds before it is tried again (0: 5 s), so a missing
	// topic holds its own messages, not the others'.
	KindBackoff time.Duration
	// StoreTimeout bounds each of the round's calls to the store (0: 10 s).
	StoreTimeout time.Duration
	// Exclude are kinds never claimed (those turned off: their messages
	// wait in the outbox until they are turned on again).
	Exclude []messages.OutboxKind
	// RefusedForGood tells a refusal no retry can change (a message over
	// the topic's size limit): the message is kept aside for a person and
	// its key goes on. Nil: every refusal is retried.
	RefusedForGood func(error) bool
	Logger         *slog.Logger
}

// RelayState is what the relay did and sees.
type RelayState struct {
	Backlog messages.OutboxBacklog
	// BacklogAt is when Backlog was read; zero before the first read.
	BacklogAt time.Time
	// Published and Failed count messages acknowledged and refused (to be
	// retried); Parked those refused for good and kept aside.
	Published, Failed, Parked int64
	// Rounds counts the rounds run.
	Rounds int64
	// LastError is the last round's failure; empty after a clean round.
	LastError string
	// HeldKinds are the kinds left out for KindBackoff after a refusal.
	HeldKinds []messages.OutboxKind
}

// Relay is a running OutboxRelay.
type Relay struct {
	system *actor.ActorSystem
	pid    *actor.PID
	state  *atomic.Pointer[RelayState]
	stop   chan struct{}
	poke   chan struct{}
	ticker *time.Ticker
	// rounds counts the rounds and backlog reads in flight: Stop waits for
	// them, so none uses the producer or the store after it returned (and
	// its caller closed them).
	rounds *sync.WaitGroup
	// stopped is closed when the actor has stopped.
	stopped chan struct{}
}

type (
	relayWake      struct{}
	relayLingerEnd struct{ n int }
	relayRoundDone struct {
		published, failed, parked int
		full                      bool
		refused                   []messages.OutboxKind // kinds to hold
		err                       error
		afterDrain                bool // the round began after the drain was asked
	}
	relayBacklog struct {
		b   messages.OutboxBacklog
		at  time.Time
		err error
	}
	relayDrain struct {
		ctx  context.Context
		done chan error
	}
)

// StartRelay spawns the relay in system and starts its timer.
func StartRelay(system *actor.ActorSystem, cfg RelayConfig) (*Relay, error) {
	if cfg.Store == nil || cfg.Publisher == nil {
		return nil, errors.New("outbox relay: a store and a publisher are needed")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.KindBackoff <= 0 {
		cfg.KindBackoff = 5 * time.Second
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Relay{system: system, state: &atomic.Pointer[RelayState]{}, stop: make(chan struct{}), poke: make(chan struct{}, 1),
		ticker: time.NewTicker(cfg.Interval), rounds: &sync.WaitGroup{}, stopped: make(chan struct{})}
	r.state.Store(&RelayState{})
	a := &relayActor{cfg: cfg, state: r.state, held: map[messages.OutboxKind]time.Time{}, rounds: r.rounds, stopped: r.stopped}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), "outbox-relay")
	if err != nil {
		r.ticker.Stop()
		return nil, fmt.Errorf("outbox relay: %w", err)
	}
	r.pid = pid
	go r.pump(cfg.Wake)
	system.Root.Send(pid, relayWake{})
	return r, nil
}

// pump turns the timer and the store's notifications into wakes until Stop.
func (r *Relay) pump(wake <-chan struct{}) {
	for {
		select {
		case <-r.stop:
			return
		case <-r.ticker.C:
		case <-wake:
		case <-r.poke:
		}
		r.system.Root.Send(r.pid, relayWake{})
	}
}

// Wake asks for a round now (the store's hook after a commit that wrote
// to the outbox); it never blocks.
func (r *Relay) Wake() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// State returns what the relay did and sees.
func (r *Relay) State() RelayState { return *r.state.Load() }

// Stop publishes what waits in the outbox, round after round, until a
// round finds nothing to publish or ctx ends, then stops the relay. It
// returns the last round's error, or ctx's.
func (r *Relay) Stop(ctx context.Context) error {
	close(r.stop)
	r.ticker.Stop()
	done := make(chan error, 1)
	r.system.Root.Send(r.pid, relayDrain{ctx: ctx, done: done})
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.system.Root.Poison(r.pid)
	// Once the actor stopped it starts no round; the round and the backlog
	// read in flight end within the publisher's bound and the store's
	// timeouts, and only then may the caller close them.
	<-r.stopped
	r.rounds.Wait()
	return err
}

type relayActor struct {
	cfg      RelayConfig
	state    *atomic.Pointer[RelayState]
	running  bool        // a round is in flight
	again    bool        // a wake came during the round
	started  time.Time   // when the last round started
	linger   *time.Timer // set while a wake waits for the linger to end
	lingers  int         // the timers set: a stale timer's end is known by its number
	reading  bool        // a backlog read is in flight
	lastRead time.Time
	held     map[messages.OutboxKind]time.Time // kind → until when it is left out
	drain    *relayDrain
	rounds   *sync.WaitGroup
	stopped  chan struct{} // closed at *actor.Stopped
}

func (a *relayActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case relayWake:
		a.wake(c)
	case relayLingerEnd:
		if m.n == a.lingers && a.linger != nil {
			a.linger = nil
			a.wake(c)
		}
	case relayRoundDone:
		a.roundFinished(c, m)
	case relayBacklog:
		a.reading = false
		a.update(func(s *RelayState) {
			if m.err == nil {
				s.Backlog, s.BacklogAt = m.b, m.at
			}
		})
	case relayDrain:
		a.drain = &m
		a.wake(c)
	case *actor.Stopped:
		if a.linger != nil {
			a.linger.Stop()
		}
		close(a.stopped)
	}
}

func (a *relayActor) wake(c actor.Context) {
	now := time.Now()
	if !a.reading && now.Sub(a.lastRead) >= a.cfg.Interval {
		a.reading, a.lastRead = true, now
		self, root := c.Self(), c.ActorSystem().Root
		a.rounds.Add(1) // Stop waits for it as for a round: it uses the store
		go func() {
			defer a.rounds.Done()
			ctx, cancel := context.WithTimeout(context.Background(), a.cfg.StoreTimeout)
			defer cancel()
			b, err := a.cfg.Store.Backlog(ctx)
			root.Send(self, relayBacklog{b: b, at: time.Now(), err: err})
		}()
	}
	if a.running {
		a.again = true
		return
	}
	a.startLingered(c, now)
}

// startLingered starts a round now, or once Linger has passed since the
// last round started; a drain never waits.
func (a *relayActor) startLingered(c actor.Context, now time.Time) {
	if a.drain == nil {
		if a.linger != nil {
			return // the linger's end starts it
		}
		if wait := a.started.Add(a.cfg.Linger).Sub(now); wait > 0 {
			a.lingers++
			self, root, n := c.Self(), c.ActorSystem().Root, a.lingers
			a.linger = time.AfterFunc(wait, func() { root.Send(self, relayLingerEnd{n: n}) })
			return
		}
	}
	a.startRound(c, now)
}

func (a *relayActor) startRound(c actor.Context, now time.Time) {
	exclude := append([]messages.OutboxKind(nil), a.cfg.Exclude...)
	for k, until := range a.held {
		if now.Before(until) {
			exclude = append(exclude, k)
		} else {
			delete(a.held, k)
		}
	}
	a.running, a.again, a.started = true, false, now
	if a.linger != nil {
		a.linger.Stop()
		a.linger = nil
	}
	self, root := c.Self(), c.ActorSystem().Root
	cfg, afterDrain := a.cfg, a.drain != nil
	a.rounds.Add(1)
	go func() {
		defer a.rounds.Done()
		done := runRelayRound(cfg, exclude)
		done.afterDrain = afterDrain
		root.Send(self, done)
	}()
}

func (a *relayActor) roundFinished(c actor.Context, m relayRoundDone) {
	a.running = false
	now := time.Now()
	for _, k := range m.refused {
		a.held[k] = now.Add(a.cfg.KindBackoff)
	}
	a.update(func(s *RelayState) {
		s.Published += int64(m.published)
		s.Failed += int64(m.failed)
		s.Parked += int64(m.parked)
		s.Rounds++
		s.LastError = ""
		if m.err != nil {
			s.LastError = m.err.Error()
		}
		s.HeldKinds = s.HeldKinds[:0:0]
		for k, until := range a.held {
			if now.Before(until) {
				s.HeldKinds = append(s.HeldKinds, k)
			}
		}
	})
	if m.err != nil {
		a.cfg.Logger.Warn("outbox relay: round failed; the messages wait in the outbox", "error", m.err,
			"published", m.published, "refused", m.failed)
	}
	if d := a.drain; d != nil {
		// Draining: go on while rounds publish and the caller waits; a
		// round that began before the drain was asked may have claimed
		// before the last messages committed, so one more always runs.
		if (!m.afterDrain || m.published > 0) && m.err == nil && d.ctx.Err() == nil {
			a.startRound(c, now)
			return
		}
		d.done <- m.err
		a.drain = nil
		return
	}
	switch {
	case m.full:
		a.startRound(c, now)
	case a.again:
		a.startLingered(c, now)
	}
}

func (a *relayActor) update(f func(*RelayState)) {
	s := *a.state.Load()
	f(&s)
	a.state.Store(&s)
}

// runRelayRound claims a batch, publishes it and deletes what the broker
// acknowledged. For each ordering key it deletes the messages up to its
// first refused one: that one and every later one of its key are published
// again by a later round, so the last copy of each key's messages comes in
// id order.
func runRelayRound(cfg RelayConfig, exclude []messages.OutboxKind) relayRoundDone {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.StoreTimeout)
	msgs, finish, err := cfg.Store.Claim(ctx, cfg.Batch, exclude)
	cancel()
	if err != nil {
		return relayRoundDone{err: fmt.Errorf("claim: %w", err)}
	}
	var (
		res     relayRoundDone
		outcome messages.OutboxOutcome
	)
	if len(msgs) > 0 {
		errs := cfg.Publisher.Publish(msgs)
		outcome, res = acknowledgedPrefix(msgs, errs, cfg.RefusedForGood)
		for id, why := range outcome.Refused {
			cfg.Logger.Error("outbox: a message refused for good is kept aside for a person (outbox.refused); its key goes on", "id", id, "reason", why)
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), cfg.StoreTimeout)
	defer cancel()
	if err := finish(ctx, outcome); err != nil {
		// Published and not deleted: they go again, with their event ids.
		res.err = errors.Join(res.err, fmt.Errorf("delete published: %w", err))
		res.published = 0
		return res
	}
	res.full = len(msgs) >= cfg.Batch
	return res
}

// acknowledgedPrefix returns what the round did: each key's messages
// acknowledged up to its first refused one, to delete; the messages
// refused for good (refusedForGood), to keep aside without holding their
// key; and the counts, with the kinds to hold after a refusal that a retry
// may change.
func acknowledgedPrefix(msgs []messages.OutboxMessage, errs []error, refusedForGood func(error) bool) (messages.OutboxOutcome, relayRoundDone) {
	var (
		res     relayRoundDone
		outcome messages.OutboxOutcome
		blocked = map[string]bool{}
		held    = map[messages.OutboxKind]bool{}
	)
	for i, m := range msgs {
		var err error
		if i < len(errs) {
			err = errs[i]
		} else {
			err = errors.New("no answer from the publisher")
		}
		switch {
		case err != nil && refusedForGood != nil && refusedForGood(err) && !blocked[m.OrderingKey]:
			if outcome.Refused == nil {
				outcome.Refused = map[int64]string{}
			}
			outcome.Refused[m.ID] = err.Error()
			res.parked++
		case err != nil:
			res.failed++
			blocked[m.OrderingKey] = true
			if !held[m.Kind] {
				held[m.Kind] = true
				res.refused = append(res.refused, m.Kind)
				res.err = errors.Join(res.err, fmt.Errorf("%s: %w", m.Kind, err))
			}
		case blocked[m.OrderingKey]:
			// Acknowledged after its key's refused one: published again later.
		default:
			outcome.Published = append(outcome.Published, m.ID)
			res.published++
		}
	}
	return outcome, res
}
