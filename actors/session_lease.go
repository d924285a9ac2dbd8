package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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
// admitted finish). A confirmation is the coordinator listing the member in
// its description of the group (LeaseCheck), asked every heartbeat
// interval beside sarama's heartbeats. A description, not a heartbeat of
// its own: a heartbeat would renew the member's session, and keep in the
// group a member whose own heartbeats no longer arrive. What a
// confirmation ends is the wait, nothing else: the session ends as sarama
// decides.

// LeaseCheck asks the group's coordinator whether member (of the session
// at generation) is still in the group: nil when the coordinator says so (a
// rebalance in progress included: the member is in it), an error
// otherwise, no answer included. It returns once ctx ends.
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

// NewLeaseCheck returns a LeaseCheck that asks group's coordinator, through
// client, to describe the group: the member is confirmed while it is listed
// (the coordinator removes a member whose session expired). A read: it
// renews nothing. A coordinator that moved or did not answer is looked up
// again once.
func NewLeaseCheck(client sarama.Client, group string) LeaseCheck {
	return func(ctx context.Context, generation int32, member string) error {
		return withinContext(ctx, func() error {
			err := listed(client, group, generation, member)
			if errors.Is(err, errCoordinatorMoved) {
				if rerr := client.RefreshCoordinator(group); rerr == nil {
					err = listed(client, group, generation, member)
				}
			}
			return err
		})
	}
}

// ErrNotListed is a LeaseCheck's answer for a member the coordinator's
// description of the group lacks: thrown out.
var ErrNotListed = errors.New("not a member of the group")

// listed asks group's coordinator whether it lists member.
func listed(client sarama.Client, group string, generation int32, member string) error {
	coordinator, err := client.Coordinator(group)
	if err != nil {
		return fmt.Errorf("membership of %s in group %s: coordinator: %w", member, group, err)
	}
	desc, err := coordinator.DescribeGroups(&sarama.DescribeGroupsRequest{Groups: []string{group}})
	if err != nil {
		return fmt.Errorf("membership of %s in group %s: %w: %w", member, group, errCoordinatorMoved, err)
	}
	for _, g := range desc.Groups {
		if g.GroupId != group {
			continue
		}
		if g.Err != sarama.ErrNoError {
			return movedOr(fmt.Errorf("membership of %s in group %s: %w", member, group, g.Err))
		}
		if _, ok := g.Members[member]; ok {
			return nil
		}
		return fmt.Errorf("member %s (generation %d) of group %s, which is %s: %w", member, generation, group, g.State, ErrNotListed)
	}
	return fmt.Errorf("membership of %s in group %s: the coordinator did not describe the group", member, group)
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

// sessionLease is one session's lease: when the coordinator last confirmed
// the member, and a channel closed at each confirmation.
type sessionLease struct {
	timeout time.Duration
	mu      sync.Mutex
	last    time.Time
	// lastNano is last in unix nanoseconds, read without the lock on the
	// feed's path (twice a record): only a lapse takes the lock.
	lastNano atomic.Int64
	// confirmed is closed (and replaced) at each confirmation.
	confirmed chan struct{}
	// held is set once a feed found the lease lapsed, until a
	// confirmation: the lapse and its end are logged once each.
	held bool
	// lastErr is the latest question's failure, nil after a yes: the
	// lapse's log says why.
	lastErr error
	// waiting counts the feeds waiting for a confirmation.
	waiting int
	log     *slog.Logger
}

func newSessionLease(timeout time.Duration, start time.Time, log *slog.Logger) *sessionLease {
	l := &sessionLease{timeout: timeout, last: start, confirmed: make(chan struct{}), log: log}
	l.lastNano.Store(start.UnixNano())
	return l
}

// confirm records a confirmation at now and wakes the feeds waiting.
func (l *sessionLease) confirm(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.After(l.last) {
		l.last = now
		l.lastNano.Store(now.UnixNano())
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
		why := "no answer yet"
		if l.lastErr != nil {
			why = l.lastErr.Error()
		}
		l.log.Warn("the group coordinator has not confirmed this member for a session timeout: admitting nothing until it does (its partitions may have gone to other members)",
			"unconfirmed_for", now.Sub(l.last).Round(time.Millisecond), "session_timeout", l.timeout, "last_answer", why)
	}
	return true, l.confirmed
}

// lapsedNow reports whether the lease is lapsed now.
func (l *sessionLease) lapsedNow() bool {
	now := time.Now()
	if time.Duration(now.UnixNano()-l.lastNano.Load()) <= l.timeout {
		return false
	}
	lapsed, _ := l.lapsed(now)
	return lapsed
}

// wait returns true once the lease is not lapsed (at once if it is not
// now), false when ctx ends, the worker stops or the claim ends first.
// What ends it: a confirmation, or the session's end (sarama ends it once
// its own heartbeat fails for good or is answered "unknown member"), or
// the claim's.
func (l *sessionLease) wait(ctx context.Context, stopped, ended <-chan struct{}) bool {
	l.mu.Lock()
	l.waiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
	}()
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

// waiters returns how many feeds wait for a confirmation.
func (l *sessionLease) waiters() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

// keep asks the coordinator every interval, until ctx ends, and confirms
// the lease at each yes, dated when it was asked. A question does not wait
// for the one before: a coordinator slow to answer (but within the session
// timeout) confirms the member as often as a quick one. At most
// SessionTimeout/Interval questions (rounded up) are out at once; each is
// given up after the session timeout. Each names the session's generation
// and member id as they are then: a cooperative rebalance moves a session
// to the next generation without ending it. keep returns once ctx has
// ended and every question it asked has returned or been given up.
func (l *sessionLease) keep(ctx context.Context, cfg LeaseConfig, current func() (generation int32, member string)) {
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	limit := int((cfg.SessionTimeout + cfg.Interval - 1) / cfg.Interval)
	out := make(chan struct{}, max(limit, 1))
	var asking sync.WaitGroup
	defer asking.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case out <- struct{}{}:
		default:
			continue // as many out as can still matter
		}
		generation, member := current()
		asked := time.Now()
		asking.Go(func() {
			defer func() { <-out }()
			qctx, cancel := context.WithTimeout(ctx, cfg.SessionTimeout)
			defer cancel()
			err := withinContext(qctx, func() error { return cfg.Check(qctx, generation, member) })
			switch {
			case err == nil:
				l.confirm(asked)
			case ctx.Err() == nil:
				l.failed(err)
			}
		})
	}
}

// validate reports what makes c unusable.
func (c *LeaseConfig) validate() error {
	switch {
	case c.Check == nil:
		return errors.New("lease: no Check")
	case c.SessionTimeout <= 0:
		return fmt.Errorf("lease: SessionTimeout %v is not positive", c.SessionTimeout)
	case c.Interval <= 0 || c.Interval >= c.SessionTimeout:
		return fmt.Errorf("lease: Interval %v must be positive and below SessionTimeout %v", c.Interval, c.SessionTimeout)
	}
	return nil
}
