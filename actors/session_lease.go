package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// A member cut off from its group's coordinator (and only from it: its
// partitions' leaders still serve its fetches) is thrown out of the group
// a session timeout after the coordinator last heard from it, and its
// partitions go to other members, which start at the committed offsets. It
// does not know: sarama's heartbeat to an unreachable coordinator waits
// Net.ReadTimeout (30 s) per try, Metadata.Retry.Max (3) times over, so the
// member goes on running records (and marking offsets it can never commit)
// for up to two minutes, every one of them run again by the partition's
// next owner. The nemesis measured it: a member cut off from the
// coordinator for 24 s ran 427 records its partitions' next owners ran too.
//
// The session lease bounds that: while the coordinator has not confirmed
// the member for a session timeout, the member admits no record (those it
// admitted finish). A confirmation is the coordinator's answer to a
// heartbeat of the member's own (LeaseCheck), sent every heartbeat interval
// beside sarama's; what it ends is the wait, nothing else: the session ends
// as sarama decides.

// LeaseCheck asks the group's coordinator whether member is current at
// generation: nil when the coordinator says so (a rebalance in progress
// included: the member is in it), an error otherwise, no answer included.
type LeaseCheck func(ctx context.Context, generation int32, member string) error

// LeaseConfig turns the session lease on (BridgeConfig.Lease).
type LeaseConfig struct {
	Check LeaseCheck
	// SessionTimeout is how long without a confirmation before admission
	// is held: the coordinator's own limit for the member.
	SessionTimeout time.Duration
	// Interval is how often the coordinator is asked: the member's
	// heartbeat interval.
	Interval time.Duration
}

// NewLeaseCheck returns a LeaseCheck that sends group's coordinator,
// through client, the heartbeat the member's session sends itself: one more
// changes nothing in the group. A coordinator that moved or did not answer
// is looked up again once.
func NewLeaseCheck(client sarama.Client, group string) LeaseCheck {
	return func(ctx context.Context, generation int32, member string) error {
		return withinContext(ctx, func() error {
			err := heartbeat(client, group, generation, member)
			if errors.Is(err, errCoordinatorMoved) {
				if rerr := client.RefreshCoordinator(group); rerr == nil {
					err = heartbeat(client, group, generation, member)
				}
			}
			if errors.Is(err, sarama.ErrRebalanceInProgress) {
				return nil // current, in the rebalance
			}
			return err
		})
	}
}

// withinContext runs f and returns its error, or ctx's once ctx ends first
// (f then runs on to its own end: a sarama request ends by the client's
// Net.ReadTimeout).
func withinContext(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer: %w", ctx.Err())
	}
}

// heartbeat sends group's coordinator a heartbeat of member at generation.
func heartbeat(client sarama.Client, group string, generation int32, member string) error {
	coordinator, err := client.Coordinator(group)
	if err != nil {
		return fmt.Errorf("membership of %s in group %s: coordinator: %w", member, group, err)
	}
	hb, err := coordinator.Heartbeat(&sarama.HeartbeatRequest{GroupId: group, GenerationId: generation, MemberId: member})
	if err != nil {
		return fmt.Errorf("membership of %s in group %s: %w: %w", member, group, errCoordinatorMoved, err)
	}
	if hb.Err != sarama.ErrNoError {
		return movedOr(fmt.Errorf("member %s of group %s at generation %d: %w", member, group, generation, hb.Err))
	}
	return nil
}

// sessionLease is one session's lease: when the coordinator last confirmed
// the member, and a channel closed at each confirmation.
type sessionLease struct {
	timeout time.Duration
	mu      sync.Mutex
	last    time.Time
	// confirmed is closed (and replaced) at each confirmation.
	confirmed chan struct{}
	// held is set once a feed found the lease lapsed, until a
	// confirmation: the lapse and its end are logged once each.
	held bool
	// lastErr is the latest question's failure, nil after a yes: the
	// lapse's log says why.
	lastErr error
	log     *slog.Logger
}

func newSessionLease(timeout time.Duration, start time.Time, log *slog.Logger) *sessionLease {
	return &sessionLease{timeout: timeout, last: start, confirmed: make(chan struct{}), log: log}
}

// confirm records a confirmation at now and wakes the feeds waiting.
func (l *sessionLease) confirm(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.After(l.last) {
		l.last = now
	}
	l.lastErr = nil
	close(l.confirmed)
	l.confirmed = make(chan struct{})
	if l.held {
		l.held = false
		l.log.Info("the group coordinator confirms this member again: admitting records")
	}
}

// failed records a question's failure.
func (l *sessionLease) failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastErr = err
}

// lapsed reports whether at now the coordinator has not confirmed the
// member for longer than the session timeout, and the channel the next
// confirmation closes.
func (l *sessionLease) lapsed(now time.Time) (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.last) <= l.timeout {
		return false, nil
	}
	if !l.held {
		l.held = true
		l.log.Warn("the group coordinator has not confirmed this member for a session timeout: admitting nothing until it does (its partitions may have gone to other members)",
			"unconfirmed_for", now.Sub(l.last).Round(time.Millisecond), "session_timeout", l.timeout, "last_error", l.lastErr)
	}
	return true, l.confirmed
}

// wait returns true once the lease is not lapsed (at once if it is not
// now), false when ctx ends, the worker stops or the claim ends first.
// What ends it: a confirmation, or the session's end (sarama ends it once
// its own heartbeat fails for good or is answered "unknown member"), or
// the claim's.
func (l *sessionLease) wait(ctx context.Context, stopped, ended <-chan struct{}) bool {
	for {
		lapsed, next := l.lapsed(time.Now())
		if !lapsed {
			return true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return false
		case <-stopped:
			return false
		case <-ended:
			return false
		}
	}
}

// keep asks the coordinator every interval, until ctx ends, and confirms
// the lease at each yes. One question at a time: a question the
// coordinator does not answer is given up after the session timeout. Each
// question names the session's generation and member id as they are then:
// a cooperative rebalance moves a session to the next generation without
// ending it, and a question about the one it left is answered
// ILLEGAL_GENERATION.
func (l *sessionLease) keep(ctx context.Context, cfg LeaseConfig, current func() (generation int32, member string)) {
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		qctx, cancel := context.WithTimeout(ctx, cfg.SessionTimeout)
		asked := time.Now()
		generation, member := current()
		err := cfg.Check(qctx, generation, member)
		cancel()
		if err == nil {
			l.confirm(asked)
		} else if ctx.Err() == nil {
			l.failed(err)
		}
	}
}
