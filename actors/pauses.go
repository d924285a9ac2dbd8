package actors

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// Pauses are the topics whose records the bridge does not admit now: an
// application's pause of consumption (consumer.Pause) that keeps the
// member in its group, so nothing is rebalanced. The record in hand waits
// unadmitted and the read-ahead fills to its bound, then sarama stops
// fetching the partition; records in flight finish and are committed as
// usual. The zero value pauses nothing; safe for concurrent use.
type Pauses struct {
	mu      sync.Mutex
	all     bool                     // every topic, named or not
	topics  map[string]bool          // paused by name (ignored while all)
	resumed map[string]chan struct{} // closed at the next Resume, for the topic's waiters
	// some is all || len(topics) > 0, set under mu: the feed loop asks
	// twice per record, and while nothing is paused it answers without
	// the lock every claim would share.
	some atomic.Bool
}

// Pause stops admitting records of topics; none: every topic.
func (p *Pauses) Pause(topics ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer func() { p.some.Store(p.all || len(p.topics) > 0) }()
	if len(topics) == 0 {
		p.all = true
		return
	}
	if p.topics == nil {
		p.topics = map[string]bool{}
	}
	for _, t := range topics {
		p.topics[t] = true
	}
}

// Resume admits records of topics again; none: every topic (a pause by
// name included).
func (p *Pauses) Resume(topics ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer func() { p.some.Store(p.all || len(p.topics) > 0) }()
	if len(topics) == 0 {
		p.all = false
		clear(p.topics)
	} else {
		for _, t := range topics {
			delete(p.topics, t)
		}
	}
	// Wake every waiter: each looks again (a topic resumed by name stays
	// paused while all are).
	for t, ch := range p.resumed {
		close(ch)
		delete(p.resumed, t)
	}
}

// Paused returns the topics paused by name, sorted, and whether every
// topic is.
func (p *Pauses) Paused() (topics []string, all bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t := range p.topics {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	return topics, p.all
}

// pausedNow reports whether topic's records wait now.
func (p *Pauses) pausedNow(topic string) bool {
	if p == nil || !p.some.Load() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.all || p.topics[topic]
}

// wake returns nil when topic's records may be admitted, else a channel
// closed at the next Resume.
func (p *Pauses) wake(topic string) <-chan struct{} {
	if p == nil || !p.some.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.all && !p.topics[topic] {
		return nil
	}
	if p.resumed == nil {
		p.resumed = map[string]chan struct{}{}
	}
	ch, ok := p.resumed[topic]
	if !ok {
		ch = make(chan struct{})
		p.resumed[topic] = ch
	}
	return ch
}

// wait returns true once topic may be admitted, false when ctx ends, the
// worker stops or the claim ends first.
func (p *Pauses) wait(ctx context.Context, topic string, paused func(bool), stopped, ended <-chan struct{}) bool {
	for {
		ch := p.wake(topic)
		if ch == nil {
			paused(false)
			return true
		}
		paused(true)
		select {
		case <-ch:
		case <-ctx.Done():
			paused(false)
			return false
		case <-stopped:
			paused(false)
			return false
		case <-ended:
			paused(false)
			return false
		}
	}
}
