package consumer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/patchflow/patchflow/actors"
)

// lagReadTimeout bounds each request of a lag read (the lag client's
// Net.ReadTimeout; sarama's default is 30 s), and so how long Run waits for
// a read the brokers hold when it returns.
const lagReadTimeout = 5 * time.Second

// topicLagWatch reads the group's lag on every topic (every partition,
// claimed or not) each interval and keeps the latest good read for
// /metrics and /status: a read costs a few requests per partition, too
// many to make per scrape.
type topicLagWatch struct {
	read   actors.TopicLagReader
	every  time.Duration
	logger *slog.Logger

	mu     sync.Mutex
	lags   []actors.TopicLag
	at     time.Time // of the last good read; before one, when the watch began
	failed bool      // the last read failed (logged once per run of failures)
}

func newTopicLagWatch(read actors.TopicLagReader, every time.Duration, logger *slog.Logger) *topicLagWatch {
	return &topicLagWatch{read: read, every: every, logger: logger, at: time.Now()}
}

// latest is the last good read and when it was made (before one: none, and
// when the watch began).
func (w *topicLagWatch) latest() ([]actors.TopicLag, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lags, w.at
}

// run reads at once and then every interval until ctx ends. A read ends
// with its request in flight (each bounded by lagReadTimeout) once ctx
// ends, and a tick missed while a read ran is not made up.
func (w *topicLagWatch) run(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		w.readOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *topicLagWatch) readOnce(ctx context.Context) {
	lags, err := w.read(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if !w.failed && ctx.Err() == nil {
			w.logger.Warn("reading the group's lag per topic failed; patchflow_topic_* keep the last read", "error", err)
		}
		w.failed = true
		return
	}
	if w.failed {
		w.logger.Info("reading the group's lag per topic works again")
	}
	w.lags, w.at, w.failed = lags, time.Now(), false
}
