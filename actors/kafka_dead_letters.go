package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/IBM/sarama"
	"github.com/eapache/go-resiliency/breaker"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/messages"
)

// KafkaDeadLetters writes dead-letter envelopes to a Kafka topic through a
// sarama SyncProducer, which returns only after the broker acknowledged the
// write (configure RequiredAcks = WaitForAll for durability).
//
// The envelope is keyed like the original record (a key over 256 bytes by
// its marker, see recordKey), so one host's dead letters stay in order.
// Headers carry the reason for tools that do not decode protobuf. An
// envelope too large for the topic even compressed (or, without Large, for
// the producer's Producer.MaxMessageBytes) is written again cut to fit
// (FitDeadLetter: its quotes first, its value last), so no record can block
// its partition forever.
type KafkaDeadLetters struct {
	Producer sarama.SyncProducer
	// Large, when set, writes the envelopes Producer refuses, before sending
	// them, as over its Producer.MaxMessageBytes: sarama measures a record
	// before compressing it and the broker after, so such an envelope may
	// still fit the topic. Configure it with NewLargeProducerConfig (one
	// record per request).
	Large sarama.SyncProducer
	// Topic is where a letter goes whose source topic Topics does not name.
	Topic string
	// Topics is each source topic's dead-letter topic, when they differ.
	Topics map[string]string
	// MaxBytes is the topic's max.message.bytes, what an envelope the
	// topic refuses is cut to fit (FitDeadLetter); 0 when unknown: it is
	// then cut for Kafka's default limit, and smaller ones in turn, until
	// the topic takes it. Limits, when it names the topic, wins.
	MaxBytes int
	Limits   map[string]int
}

// topicOf is letter's dead-letter topic and that topic's max.message.bytes.
func (k *KafkaDeadLetters) topicOf(letter *messages.DeadLetter) (string, int) {
	t := k.Topic
	if named, ok := k.Topics[letter.GetOriginalTopic()]; ok {
		t = named
	}
	if limit, ok := k.Limits[t]; ok {
		return t, limit
	}
	return t, k.MaxBytes
}

// NewKafkaDeadLetters opens the dead-letter producers for k.DLQTopic on
// k.Brokers, configured by NewProducerConfig and NewLargeProducerConfig;
// Close closes them.
func NewKafkaDeadLetters(k KafkaSettings) (*KafkaDeadLetters, error) {
	cfg, err := NewProducerConfig(k)
	if err != nil {
		return nil, err
	}
	large, err := NewLargeProducerConfig(k)
	if err != nil {
		return nil, err
	}
	w := &KafkaDeadLetters{Topic: k.DLQTopic, MaxBytes: k.DeadLetterMaxBytes, Topics: k.DeadLetterTopics, Limits: k.DeadLetterLimits}
	if w.Producer, err = sarama.NewSyncProducer(k.Brokers, cfg); err != nil {
		return nil, fmt.Errorf("dead-letter producer: %w", err)
	}
	if w.Large, err = sarama.NewSyncProducer(k.Brokers, large); err != nil {
		_ = w.Producer.Close()
		return nil, fmt.Errorf("dead-letter producer of large envelopes: %w", err)
	}
	return w, nil
}

// Close closes the producers.
func (k *KafkaDeadLetters) Close() error {
	err := k.Producer.Close()
	if k.Large != nil {
		err = errors.Join(err, k.Large.Close())
	}
	return err
}

// Write sends letter and waits for the acknowledgement, or until ctx is
// done. When the topic (or the producer) refuses it as too large, it sends
// it again cut (smallerLetters: for MaxBytes, then for smaller limits in
// turn), until one is taken: letter itself is never changed. Its errors
// name the cause and, for the common ones (topic missing, write not
// authorised, envelope too large even cut to its least), what to change;
// errors.Is still finds sarama's error underneath.
func (k *KafkaDeadLetters) Write(ctx context.Context, letter *messages.DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	topic, limit := k.topicOf(letter)
	err := k.send(ctx, topic, letter)
	if isTooLarge(err) {
		for smaller := range smallerLetters(letter, limit) {
			if err = k.send(ctx, topic, smaller); !isTooLarge(err) {
				break
			}
		}
	}
	if err == nil || ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	return explain(topic, err)
}

// send writes letter to topic through Producer, or through Large when Producer
// refuses it as over its own limit.
func (k *KafkaDeadLetters) send(ctx context.Context, topic string, letter *messages.DeadLetter) error {
	body, err := proto.Marshal(letter)
	if err != nil {
		return fmt.Errorf("encode dead letter: %w", err)
	}
	err = k.sendMessage(ctx, k.Producer, deadLetterMessage(topic, letter, sarama.ByteEncoder(body)))
	if k.Large != nil && isOverProducerLimit(err) {
		err = k.sendMessage(ctx, k.Large, deadLetterMessage(topic, letter, sarama.ByteEncoder(body)))
	}
	return err
}

// sendMessage runs the SyncProducer's SendMessage, which takes no context and
// can block for Producer.Retry.Max × (Producer.Timeout + Retry.Backoff) or
// longer when the brokers are unreachable, in a goroutine, and returns
// ctx.Err() as soon as ctx is done, so a drain is never held by a send.
//
// The abandoned send may still complete later, and the envelope may then be
// stored. That is harmless: the record was not reported finished, so its
// offset is not marked, Kafka redelivers it, and it may be dead-lettered a
// second time (dead-letter consumers must tolerate duplicates, as after any
// crash). The goroutine ends when SendMessage returns, which sarama bounds by
// its retries and by the producer's Close; its result channel is buffered,
// so it never waits for a reader that has gone.
func (k *KafkaDeadLetters) sendMessage(ctx context.Context, producer sarama.SyncProducer, msg *sarama.ProducerMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	result := make(chan error, 1)
	go func() {
		_, _, err := producer.SendMessage(msg)
		result <- err
	}()
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// explain wraps a failed write with its cause and the fix, keeping err
// reachable through errors.Is and errors.As.
func explain(t string, err error) error {
	var what string
	switch {
	case errors.Is(err, sarama.ErrUnknownTopicOrPartition):
		what = fmt.Sprintf("dead-letter topic %s does not exist: create it (the consumer creates it at start when it can)", t)
	case errors.Is(err, sarama.ErrTopicAuthorizationFailed):
		what = fmt.Sprintf("the broker refused the write to dead-letter topic %s: grant the consumer's principal WRITE on topic %s", t, t)
	case errors.Is(err, sarama.ErrClusterAuthorizationFailed):
		what = fmt.Sprintf("the broker refused the idempotent write to dead-letter topic %s: grant the consumer's principal WRITE on topic %s (brokers before Kafka 2.8 also want IDEMPOTENT_WRITE on the cluster)", t, t)
	case isSASLError(err):
		what = fmt.Sprintf("the broker did not accept the SASL login while writing to dead-letter topic %s: check the SASL mechanism, user and password, and that the principal may WRITE on topic %s", t, t)
	case errors.Is(err, breaker.ErrBreakerOpen):
		// sarama's producer stops asking for a topic's partitions for 10 s
		// after three failures in a row; its own error hides the cause.
		what = fmt.Sprintf("the producer could not find the partitions of dead-letter topic %s three times in a row and waits 10 s before asking again: the topic is missing or has no leader; create it, or check the brokers", t)
	case isTooLarge(err):
		what = fmt.Sprintf("dead-letter envelope too large for topic %s even cut to its least (no value, no history, every quote cut to its marker): raise max.message.bytes of topic %s (the consumer reads it at start)", t, t)
	default:
		what = "write dead letter to " + t
	}
	return fmt.Errorf("%s: %w", what, err)
}

// isTooLarge reports a record over the broker's limit (the topic's
// max.message.bytes) or over the producer's own Producer.MaxMessageBytes.
func isTooLarge(err error) bool {
	return errors.Is(err, sarama.ErrMessageSizeTooLarge) || errors.Is(err, sarama.ErrInvalidMessageSize) || isOverProducerLimit(err)
}

// isOverProducerLimit reports a record over the producer's own
// Producer.MaxMessageBytes, which sarama reports as a ConfigurationError
// before sending.
func isOverProducerLimit(err error) bool {
	var ce sarama.ConfigurationError
	return errors.As(err, &ce) && strings.Contains(string(ce), "Producer.MaxMessageBytes")
}

// isSASLError reports a failed SASL handshake or authentication.
func isSASLError(err error) bool {
	return errors.Is(err, sarama.ErrSASLAuthenticationFailed) || errors.Is(err, sarama.ErrUnsupportedSASLMechanism) ||
		errors.Is(err, sarama.ErrIllegalSASLState)
}
