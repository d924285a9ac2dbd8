package consumer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
)

// Crash makes every transactional committer act as if the process had
// died (see crashed) while on.
func Crash(on bool) { crashed.Store(on) }

// SetTxnAheadLimit sets txnAheadLimit and returns what restores it.
func SetTxnAheadLimit(d time.Duration) (restore func()) {
	was := txnAheadLimit.Swap(int64(d))
	return func() { txnAheadLimit.Store(was) }
}

// fakeProducer is a sarama.SyncProducer whose SendMessages runs send.
type fakeProducer struct {
	sarama.SyncProducer
	send func([]*sarama.ProducerMessage) error
}

func (p fakeProducer) SendMessages(msgs []*sarama.ProducerMessage) error { return p.send(msgs) }

// StageRace runs claimTxn.stage n times with a ctx that ends as the write
// is acknowledged, and counts the stages that returned nil (the record
// finishes) while their results were not staged (a later abort drops
// them, and the commit that calls the record finished carries no result).
func StageRace(n int) (lost, dirtyNil int) {
	msgs := []*sarama.ProducerMessage{{Topic: "out", Value: sarama.StringEncoder("v")}}
	for range n {
		ctx, cancel := context.WithCancel(context.Background())
		c := &claimTxn{known: knownTopics{m: map[string]bool{"out": true}}}
		c.producer = &txnProducer{SyncProducer: fakeProducer{send: func([]*sarama.ProducerMessage) error {
			cancel()
			return nil
		}}}
		err := c.stage(ctx, 1, msgs, []string{"out"})
		c.mu.Lock()
		if err == nil && len(c.staged) == 0 {
			lost++
			if c.dirty {
				dirtyNil++
			}
		}
		c.mu.Unlock()
		cancel()
	}
	return lost, dirtyNil
}

// FinalRetryWait is how long claimTxn.retry waits before the next try of a
// claim's last commit (End closed stop), given a backoff of wait.
func FinalRetryWait(wait time.Duration) (time.Duration, bool) {
	c := &claimTxn{stop: make(chan struct{}), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	close(c.stop)
	start := time.Now()
	again := c.retry(true, start, &wait, errors.New("broker says no"))
	return time.Since(start), again
}
