package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	open func() (sarama.Client, sarama.SyncProducer, error)
	deps *actors.Dependencies
	// txn, in the transactional mode, writes results into their claim's
	// transaction instead.
	txn *transactions

	once     sync.Once
	client   sarama.Client
	producer sarama.SyncProducer
	err      error

	// mu guards sends and closed. A send counts itself in sends
	// while it runs; close marks closed and the last send out (or close,
	// when none runs) closes the producer, so no send reaches a closed
	// producer, whose input would panic, and close never waits for one
	// (a send is bounded by the producer's retries, not by the drain).
	mu     sync.Mutex
	sends  int
	closed bool
	known  knownTopics
}

// errResultsClosed fails a send that came after the consumer stopped (a
// handler that outlived its drain): its record was not committed.
var errResultsClosed = errors.New("the consumer has stopped: results not produced")

// begin counts a send in, false once closed.
func (p *results) begin() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.sends++
	return true
}

// finish counts a send out, closing the producer when it was the last
// after close.
func (p *results) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sends--; p.sends == 0 && p.closed {
		p.shut()
	}
}

// shut closes the producer and its client; p.mu held.
func (p *results) shut() {
	if p.producer != nil {
		_ = p.producer.Close()
		p.producer = nil
	}
	if p.client != nil {
		_ = p.client.Close()
		p.client = nil
	}
}

// knownTopics are the result topics seen to exist.
type knownTopics struct {
	mu sync.Mutex
	m  map[string]bool
}

// missing returns the first of topics client's brokers do not know, asking
// once per topic until it exists: a send to a missing topic would trip the
// producer's breaker (10 s of refusals, and a timer goroutine) and say
// only "failed to deliver", or fail a whole transaction.
func (k *knownTopics) missing(client sarama.Client, topics []string) (string, error) {
	for _, t := range topics {
		k.mu.Lock()
		ok := k.m[t]
		k.mu.Unlock()
		if ok {
			continue
		}
		if _, err := client.Partitions(t); err != nil {
			return t, err
		}
		k.mu.Lock()
		if k.m == nil {
			k.m = map[string]bool{}
		}
		k.m[t] = true
		k.mu.Unlock()
	}
	return "", nil
}

// produce sends r's results and waits for their acknowledgements, or for
// ctx; the outcome is reported as a call to ResultsDependency.
func (p *results) produce(ctx context.Context, r *Record) error {
	if len(r.results) == 0 {
		return nil
	}
	msgs, topics := resultMessages(r)
	if p.txn != nil {
		return p.txn.produce(ctx, r, msgs, topics)
	}
	p.once.Do(func() {
		p.client, p.producer, p.err = p.open()
	})
	if p.err != nil {
		return FailedIn(ResultsDependency, fmt.Errorf("open the results producer: %w", p.err))
	}
	if !p.begin() {
		return errResultsClosed
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { // sarama takes no context; done is buffered, so the send never waits for a reader
		defer p.finish()
		if t, err := p.known.missing(p.client, topics); err != nil {
			done <- fmt.Errorf("results topic %q: %w", t, err)
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
	return sendOutcome(ctx, p.deps, time.Since(start), fmt.Sprintf("produce %d results", len(msgs)), err)
}

// sendOutcome reports a send of results that took took to the retry rule
// as a call to ResultsDependency, and classes its error: nil, Permanent
// for a message no retry can write (the broker answered: it is up), or a
// failure in ResultsDependency, what naming the send.
func sendOutcome(ctx context.Context, deps *actors.Dependencies, took time.Duration, what string, err error) error {
	if err == nil {
		deps.Observe(ctx, ResultsDependency, took, true)
		return nil
	}
	err = fmt.Errorf("%s: %w", what, firstProducerError(err))
	if refusedForGood(err) {
		deps.Observe(ctx, ResultsDependency, took, true)
		return Permanent(err)
	}
	deps.Observe(ctx, ResultsDependency, took, false)
	return FailedIn(ResultsDependency, err)
}

// resultMessages are r's results as the producer takes them, each with
// the headers naming r, and the topics they go to.
func resultMessages(r *Record) ([]*sarama.ProducerMessage, []string) {
	msgs := make([]*sarama.ProducerMessage, len(r.results))
	topics := make([]string, 0, 1)
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
		if !slices.Contains(topics, m.Topic) {
			topics = append(topics, m.Topic)
		}
	}
	return msgs, topics
}

// firstProducerError is err with its first message's topic and error
// when it is sarama's ProducerErrors, which says only "failed to deliver".
func firstProducerError(err error) error {
	var pe sarama.ProducerErrors
	if errors.As(err, &pe) && len(pe) > 0 {
		return fmt.Errorf("%w (first: topic %q: %w)", err, pe[0].Msg.Topic, pe[0].Err)
	}
	return err
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

// close closes the producer (and its client) once no send runs, without
// waiting for one: a send still running then closes it as it ends.
func (p *results) close() {
	p.once.Do(func() { p.err = errResultsClosed }) // no open after this
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.sends == 0 {
		p.shut()
	}
}
