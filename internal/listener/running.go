package listener

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/consumer"
)

// Running is a listener that Start runs in the background, for the demo
// and the benchmark.
type Running struct {
	Bridge *actors.Bridge
	exited chan struct{} // closed when RunWith returned; err is set then
	err    error
	cancel context.CancelFunc
}

// Start runs RunWith in the background and returns once its bridge exists,
// or RunWith's error when it could not start.
func Start(ctx context.Context, cfg *Config, handler consumer.Handler, logger *slog.Logger) (*Running, error) {
	runCtx, cancel := context.WithCancel(ctx)
	r := &Running{exited: make(chan struct{}), cancel: cancel}
	ready := make(chan struct{})
	go func() {
		defer close(r.exited)
		r.err = RunWith(runCtx, cfg, handler, logger, Hooks{Started: func(b *actors.Bridge) { r.Bridge = b; close(ready) }})
	}()
	select {
	case <-ready:
		return r, nil
	case <-r.exited:
		cancel()
		return nil, r.err
	}
}

// Exited closes when the listener has stopped, by Stop or on its own.
func (r *Running) Exited() <-chan struct{} { return r.exited }

// Err is RunWith's result once Exited has closed.
func (r *Running) Err() error {
	<-r.exited
	return r.err
}

// Stop drains and stops the listener and returns RunWith's result. It may
// be called more than once.
func (r *Running) Stop() error {
	r.cancel()
	return r.Err()
}

// TimedHandler measures the mean time of the handler it wraps.
type TimedHandler struct {
	Inner        consumer.Handler
	nanos, calls atomic.Int64
}

// Handle implements consumer.Handler.
func (h *TimedHandler) Handle(ctx context.Context, r *consumer.Record) error {
	start := time.Now()
	err := h.Inner.Handle(ctx, r)
	h.nanos.Add(int64(time.Since(start)))
	h.calls.Add(1)
	return err
}

// Mean returns the mean time per call, and the number of calls.
func (h *TimedHandler) Mean() (time.Duration, int64) {
	n := h.calls.Load()
	if n == 0 {
		return 0, 0
	}
	return time.Duration(h.nanos.Load() / n), n
}
