package actors

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/messages"
)

// KafkaOutboxPublisher publishes outbox messages through sarama's
// idempotent producer (acks=all, one request in flight per broker, so a
// retried batch never overtakes the next). Each kind goes to its topic;
// the record carries the message's key and its event id as the header
// messages.EventIDHeader.
type KafkaOutboxPublisher struct {
	producer sarama.AsyncProducer
	topics   map[messages.OutboxKind]string
	mu       sync.Mutex // one Publish at a time: its results are read from the producer's channels
}

// NewOutboxProducerConfig is the relay's producer: NewProducerConfig's, with
// snappy for zstd (StatelessCodec), with
// topics never created by a publish (a missing topic is the platform's to
// create: its messages wait in the outbox) and a bounded retry budget:
// each of the OutboxPublishRetries + 1 tries of a batch waits at most
// Producer.Timeout plus the network timeouts (10 s each), and the metadata
// refresh between tries at most Metadata.Retry.Max + 1 rounds of a dial
// per broker, so Publish returns within a few minutes even when every
// broker stops answering (seconds when they refuse).
func NewOutboxProducerConfig(k KafkaSettings) (*sarama.Config, error) {
	cfg, err := NewProducerConfig(k)
	if err != nil {
		return nil, err
	}
	cfg.ClientID += "-outbox"
	cfg.Producer.Compression = StatelessCodec
	cfg.Metadata.AllowAutoTopicCreation = false
	cfg.Producer.Retry.Max = OutboxPublishRetries
	cfg.Producer.Retry.Backoff = 250 * time.Millisecond
	cfg.Producer.Timeout = 10 * time.Second
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = 10*time.Second, 10*time.Second, 10*time.Second
	cfg.Producer.Flush.Frequency = time.Millisecond
	return cfg, cfg.Validate()
}

// OutboxPublishRetries is how often the relay's producer retries a batch.
const OutboxPublishRetries = 3

// NewKafkaOutboxPublisher opens the relay's producer on k.Brokers (config:
// NewOutboxProducerConfig) publishing each kind to topics[kind].
func NewKafkaOutboxPublisher(k KafkaSettings, topics map[messages.OutboxKind]string) (*KafkaOutboxPublisher, error) {
	cfg, err := NewOutboxProducerConfig(k)
	if err != nil {
		return nil, err
	}
	p, err := sarama.NewAsyncProducer(k.Brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("outbox producer: %w", err)
	}
	return &KafkaOutboxPublisher{producer: p, topics: topics}, nil
}

// Publish implements OutboxPublisher. It waits for every message's answer
// from the producer, which gives one within its retry budget.
func (p *KafkaOutboxPublisher) Publish(msgs []messages.OutboxMessage) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(msgs))
	waiting := 0
	answer := func(pm *sarama.ProducerMessage, err error) {
		if i, ok := pm.Metadata.(int); ok && i >= 0 && i < len(errs) {
			errs[i] = err
			waiting--
		}
	}
	for i, m := range msgs {
		topic := p.topics[m.Kind]
		if topic == "" {
			errs[i] = fmt.Errorf("no topic configured for %s messages", m.Kind)
			continue
		}
		pm := &sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(m.Value), Metadata: i,
			Headers: []sarama.RecordHeader{{Key: []byte(messages.EventIDHeader), Value: []byte(m.EventID)}}}
		if m.Key != nil {
			pm.Key = sarama.ByteEncoder(m.Key)
		}
		waiting++
		// Read answers while sending: the producer's channels are bounded,
		// and a batch larger than them would otherwise wait on itself.
		for sent := false; !sent; {
			select {
			case p.producer.Input() <- pm:
				sent = true
			case s := <-p.producer.Successes():
				answer(s, nil)
			case e := <-p.producer.Errors():
				answer(e.Msg, explainPublish(e.Err))
			}
		}
	}
	for waiting > 0 {
		select {
		case s := <-p.producer.Successes():
			answer(s, nil)
		case e := <-p.producer.Errors():
			answer(e.Msg, explainPublish(e.Err))
		}
	}
	return errs
}

// explainPublish names what to do about the common refusals.
func explainPublish(err error) error {
	switch {
	case errors.Is(err, sarama.ErrUnknownTopicOrPartition):
		return fmt.Errorf("%w (the topic does not exist: create it; its messages wait in the outbox)", err)
	case errors.Is(err, sarama.ErrTopicAuthorizationFailed):
		return fmt.Errorf("%w (grant the listener's user WRITE on the topic; its messages wait in the outbox)", err)
	}
	return err
}

// OutboxRefusedForGood tells a refusal no retry can change: a message over
// the topic's (or the producer's) size limit, or one the broker finds
// invalid. The relay keeps such a message aside instead of retrying it.
func OutboxRefusedForGood(err error) bool {
	var cfgErr sarama.ConfigurationError
	return errors.Is(err, sarama.ErrMessageSizeTooLarge) || errors.Is(err, sarama.ErrInvalidMessage) ||
		errors.Is(err, sarama.ErrInvalidRecord) || errors.Is(err, sarama.ErrMessageTooLarge) ||
		errors.As(err, &cfgErr) && strings.Contains(string(cfgErr), "larger than")
}

// Close closes the producer.
func (p *KafkaOutboxPublisher) Close() error { return p.producer.Close() }

// MissingTopics returns those of topics the brokers do not have (without
// creating any), for a warning at start.
func MissingTopics(k KafkaSettings, topics []string) ([]string, error) {
	cfg, err := NewOutboxProducerConfig(k)
	if err != nil {
		return nil, err
	}
	client, err := sarama.NewClient(k.Brokers, cfg)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	have, err := client.Topics()
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, t := range topics {
		if !slices.Contains(have, t) {
			missing = append(missing, t)
		}
	}
	return missing, nil
}
