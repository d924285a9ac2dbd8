package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

// Message is a record a handler produces as a result of the record it
// handles (Record.Produce).
type Message struct {
	Topic      string
	Key, Value []byte
	Headers    []Header
}

// The headers every result carries, naming the record it is a result of:
// a result produced twice (its record retried, or run again after a crash
// or a rebalance) carries the same three, so a consumer of the results can
// drop the copy.
const (
	ResultSourceTopicHeader     = "patchflow-source-topic"
	ResultSourcePartitionHeader = "patchflow-source-partition"
	ResultSourceOffsetHeader    = "patchflow-source-offset"
)

// ResultsDependency is the dependency a failed produce of results is
// reported under, to the retry rule and in
// patchflow_dependency_duration_seconds: the results' topics down for
// every record is an outage (retried without limit, nothing
// dead-lettered), not each record's own trouble.
const ResultsDependency = "results"

// Produce adds messages to produce as results of r. They are produced
// once Handle returns nil, in the order given, with an idempotent producer
// whose every write all in-sync replicas acknowledge, and the record counts
// as finished only when every one is acknowledged: a result is never lost.
// When Handle returns an error or a Skip, or panics, this attempt's
// messages are dropped (a message no retry can write dead-letters the
// record, and the attempt's others may have been produced); the next attempt produces its own. A failed produce
// fails the attempt (FailedIn(ResultsDependency), transient; a message
// over the topic's limit, or otherwise invalid, Permanent), so the record
// is retried and its results produced again. Duplicates are therefore
// possible, bounded by the records in flight at a crash or revoke and the
// attempts retried, and each carries the ResultSource headers.
//
// Produce is for use inside Handle, from its goroutine or another that
// Handle waits for; it is not safe to call from several at once.
func (r *Record) Produce(messages ...Message) { r.results = append(r.results, messages...) }

// results produces the records' results, opening its producer at the
// first use.
type results struct {
	open func() (sarama.SyncProducer, error)
	deps *actors.Dependencies

	once     sync.Once
	producer sarama.SyncProducer
	err      error

	// mu is held (read) by each send while it runs and (write) by close,
	// so no send reaches a closed producer, whose input would panic.
	mu     sync.RWMutex
	closed bool
}

// errResultsClosed fails a send that came after the consumer stopped (a
// handler that outlived its drain): its record was not committed.
var errResultsClosed = errors.New("the consumer has stopped: results not produced")

// produce sends r's results and waits for their acknowledgements, or for
// ctx; the outcome is reported as a call to ResultsDependency.
func (p *results) produce(ctx context.Context, r *Record) error {
	if len(r.results) == 0 {
		return nil
	}
	p.once.Do(func() { p.producer, p.err = p.open() })
	if p.err != nil {
		return FailedIn(ResultsDependency, fmt.Errorf("open the results producer: %w", p.err))
	}
	msgs := make([]*sarama.ProducerMessage, len(r.results))
	source := []sarama.RecordHeader{
		{Key: []byte(ResultSourceTopicHeader), Value: []byte(r.Topic)},
		{Key: []byte(ResultSourcePartitionHeader), Value: []byte(strconv.Itoa(int(r.Partition)))},
		{Key: []byte(ResultSourceOffsetHeader), Value: []byte(strconv.FormatInt(r.Offset, 10))},
	}
	for i, m := range r.results {
		pm := &sarama.ProducerMessage{Topic: m.Topic, Value: sarama.ByteEncoder(m.Value)}
		if m.Key != nil {
			pm.Key = sarama.ByteEncoder(m.Key)
		}
		for _, h := range m.Headers {
			pm.Headers = append(pm.Headers, sarama.RecordHeader{Key: h.Key, Value: h.Value})
		}
		pm.Headers = append(pm.Headers, source...)
		msgs[i] = pm
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { // sarama takes no context; done is buffered, so the send never waits for a reader
		p.mu.RLock()
		defer p.mu.RUnlock()
		if p.closed {
			done <- errResultsClosed
			return
		}
		done <- p.producer.SendMessages(msgs)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		return ctx.Err() // not finished: the record is run again, its results with it
	}
	took := time.Since(start)
	if err == nil {
		p.deps.Observe(ctx, ResultsDependency, took, true)
		return nil
	}
	err = fmt.Errorf("produce %d results: %w", len(msgs), err)
	if refusedForGood(err) {
		p.deps.Observe(ctx, ResultsDependency, took, true) // the broker answered: it is up
		return Permanent(err)
	}
	p.deps.Observe(ctx, ResultsDependency, took, false)
	return FailedIn(ResultsDependency, err)
}

// refusedForGood reports a result no retry can get written: larger than
// its topic (or the producer) takes, or invalid.
func refusedForGood(err error) bool {
	var pe sarama.ProducerErrors
	if errors.As(err, &pe) {
		for _, e := range pe {
			if refusedForGood(e.Err) {
				return true
			}
		}
		return false
	}
	var ce sarama.ConfigurationError
	return errors.Is(err, sarama.ErrMessageSizeTooLarge) || errors.Is(err, sarama.ErrInvalidMessageSize) ||
		errors.Is(err, sarama.ErrInvalidMessage) || errors.Is(err, sarama.ErrInvalidRecord) ||
		errors.As(err, &ce) && strings.Contains(string(ce), "MaxMessageBytes")
}

// close closes the producer, when it was opened, once the sends under way
// returned (sarama bounds them by its retries).
func (p *results) close() {
	p.once.Do(func() { p.err = errResultsClosed }) // no open after this
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.producer != nil {
		_ = p.producer.Close()
	}
}
