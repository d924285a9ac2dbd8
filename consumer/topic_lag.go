package consumer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/patchflow/patchflow/actors"
)

// lagTimeout bounds each request of a lag read: the lag client's dial,
// write and read timeouts (sarama's are 30 s), and so how long Run waits
// for a read the brokers hold when it returns (its metadata is asked of
// one broker after another, each within this).
const lagTimeout = 5 * time.Second

// topicLagWatch reads the group's lag on every topic (every partition,
// claimed or not) each interval and keeps each topic's latest good read for
// /metrics and /status: a read costs a few requests per partition, too
// many to make per scrape.
type topicLagWatch struct {
	read   actors.TopicLagReader
	topics []string
	every  time.Duration
	logger *slog.Logger

	mu     sync.Mutex
	lags   map[string]actors.TopicLag
	at     map[string]time.Time // of each topic's last good read
	began  time.Time
	failed bool // the last read failed for a topic (logged once per run of failures)
}

func newTopicLagWatch(read actors.TopicLagReader, topics []string, every time.Duration, logger *slog.Logger) *topicLagWatch {
	return &topicLagWatch{read: read, topics: topics, every: every, logger: logger,
		lags: map[string]actors.TopicLag{}, at: map[string]time.Time{}, began: time.Now()}
}

// latest is each topic's last good read, in the topics' order, and when
// the oldest of them was made (a topic never read counts from when the
// watch began): how stale the oldest value is.
func (w *topicLagWatch) latest() ([]actors.TopicLag, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []actors.TopicLag
	oldest := time.Now()
	for _, t := range w.topics {
		at, ok := w.at[t]
		if !ok {
			at = w.began
		} else {
			out = append(out, w.lags[t])
		}
		if at.Before(oldest) {
			oldest = at
		}
	}
	return out, oldest
}

// run reads at once and then every interval until ctx ends. A read ends
// with its request in flight (each bounded by lagTimeout) once ctx ends,
// and a tick missed while a read ran is not made up.
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
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range lags {
		w.lags[l.Topic], w.at[l.Topic] = l, now
	}
	if err != nil {
		if !w.failed && ctx.Err() == nil {
			w.logger.Warn("reading the group's lag per topic failed; patchflow_topic_* keep the last good read of each topic", "error", err)
		}
		w.failed = true
		return
	}
	if w.failed {
		w.logger.Info("reading the group's lag per topic works again")
	}
	w.failed = false
}
