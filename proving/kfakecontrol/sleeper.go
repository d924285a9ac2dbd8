// Package kfakecontrol sleeps the in-process broker's control functions
// (kfake.Cluster.SleepControl) in a way that closing the broker cannot
// deadlock. It imports kfake alone, so that any test, the actors' own
// internal ones among them, can use it.
package kfakecontrol

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Sleeper sleeps control functions of one cluster until Stop. Call Stop
// before closing the cluster: a control woken as the cluster closes
// strands kfake's run loop for good (SleepControl returns on the cluster's
// death, the control's goroutine takes the control lock to hand back its
// answer, and the run loop, having picked the wake-up rather than the
// death, waits for that lock for ever: goleak sees it, minutes later). Stop
// wakes every sleep and waits until each SleepControl has returned through
// the live run loop; no control sleeps after it.
type Sleeper struct {
	c       *kfake.Cluster
	mu      sync.Mutex
	stopped bool
	stop    chan struct{}
	sleeps  sync.WaitGroup
}

// New returns a Sleeper for c's control functions.
func New(c *kfake.Cluster) *Sleeper { return &Sleeper{c: c, stop: make(chan struct{})} }

// Until sleeps the current control function until ch is closed or Stop
// is called. Call it only from a control function.
func (s *Sleeper) Until(ch <-chan struct{}) {
	s.sleep(func() {
		select {
		case <-ch:
		case <-s.stop:
		}
	})
}

// For sleeps the current control function for d, or until Stop is called.
func (s *Sleeper) For(d time.Duration) {
	s.sleep(func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.stop:
		}
	})
}

func (s *Sleeper) sleep(wake func()) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.sleeps.Add(1)
	s.mu.Unlock()
	defer s.sleeps.Done()
	s.c.SleepControl(wake)
}

// Stop wakes every control sleeping and returns once each has resumed; a
// control that asks to sleep afterwards runs on at once. Idempotent. The
// wait ends because the cluster's run loop is alive until Close, which the
// caller makes after Stop.
func (s *Sleeper) Stop() {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.stop)
	}
	s.mu.Unlock()
	s.sleeps.Wait()
}
