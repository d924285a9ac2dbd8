package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
// The envelope is keyed like the original record, so one host's dead letters
// stay in order. Headers carry the reason for tools that do not decode
// protobuf. An envelope too large for the topic even compressed (or, without
// Large, for the producer's Producer.MaxMessageBytes) is written again
// without the original value (value_truncated), and then, still too large,
// without the dead letter's key (the envelope keeps it: a key of hundreds
// of KB, refused as too large, fits once and not twice), so an oversized
// record cannot block its partition forever.
type KafkaDeadLetters struct {
	Producer sarama.SyncProducer
	// Large, when set, writes the envelopes Producer refuses, before sending
	// them, as over its Producer.MaxMessageBytes: sarama measures a record
	// before compressing it and the broker after, so such an envelope may
	// still fit the topic. Configure it with NewLargeProducerConfig (one
	// record per request).
	Large sarama.SyncProducer
	Topic string
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
	w := &KafkaDeadLetters{Topic: k.DLQTopic}
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

// unkeyedAbove is the key size past which an envelope too large even
// without its value is written once more without the dead letter's key:
// below it, the key's second copy is not what makes it too large.
const unkeyedAbove = 1 << 10

// Write sends letter and waits for the acknowledgement, or until ctx is
// done. Its errors name the cause and, for the common ones (topic missing,
// write not authorised, envelope too large), what to change; errors.Is still
// finds sarama's error underneath.
func (k *KafkaDeadLetters) Write(ctx context.Context, letter *messages.DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := k.send(ctx, letter, true)
	if isTooLarge(err) && len(letter.GetValue()) > 0 {
		trimmed := proto.CloneOf(letter)
		trimmed.Value = nil
		trimmed.ValueTruncated = true
		trimmed.ValueSize = int64(len(letter.GetValue()))
		letter = trimmed
		err = k.send(ctx, letter, true)
	}
	if isTooLarge(err) && len(letter.GetKey()) > unkeyedAbove {
		// A record's key counts twice in its envelope, as the dead letter's
		// key and in it: a key too large to count twice (a record refused
		// as "key too large" may have one of hundreds of KB) goes once, in
		// the envelope, and the dead letter is not keyed.
		err = k.send(ctx, letter, false)
	}
	if err == nil || ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	return k.explain(err)
}

// send writes letter through Producer, or through Large when Producer
// refuses it as over its own limit; keyed, with the original record's key.
func (k *KafkaDeadLetters) send(ctx context.Context, letter *messages.DeadLetter, keyed bool) error {
	body, err := proto.Marshal(letter)
	if err != nil {
		return fmt.Errorf("encode dead letter: %w", err)
	}
	err = k.sendMessage(ctx, k.Producer, k.message(letter, body, keyed))
	if k.Large != nil && isOverProducerLimit(err) {
		err = k.sendMessage(ctx, k.Large, k.message(letter, body, keyed))
	}
	return err
}

// message builds the record of letter, whose encoding is body. Each send
// gets a record of its own: sarama keeps its state in the record.
func (k *KafkaDeadLetters) message(letter *messages.DeadLetter, body []byte, keyed bool) *sarama.ProducerMessage {
	msg := &sarama.ProducerMessage{
		Topic: k.Topic,
		Value: sarama.ByteEncoder(body),
		Headers: []sarama.RecordHeader{
			{Key: []byte("patchflow-error-class"), Value: []byte(letter.GetErrorClass().String())},
			{Key: []byte("patchflow-reason"), Value: []byte(letter.GetReason())},
			{Key: []byte("patchflow-original-topic"), Value: []byte(letter.GetOriginalTopic())},
			{Key: []byte("patchflow-original-partition"), Value: []byte(strconv.Itoa(int(letter.GetOriginalPartition())))},
			{Key: []byte("patchflow-original-offset"), Value: []byte(strconv.FormatInt(letter.GetOriginalOffset(), 10))},
		},
	}
	if keyed && letter.GetKey() != nil {
		msg.Key = sarama.ByteEncoder(letter.GetKey())
	}
	return msg
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
func (k *KafkaDeadLetters) explain(err error) error {
	t := k.Topic
	var what string
	switch {
	case errors.Is(err, sarama.ErrUnknownTopicOrPartition):
		what = fmt.Sprintf("dead-letter topic %s does not exist: create it (the listener creates it at start when it can)", t)
	case errors.Is(err, sarama.ErrTopicAuthorizationFailed):
		what = fmt.Sprintf("the broker refused the write to dead-letter topic %s: grant the consumer's principal WRITE on topic %s", t, t)
	case errors.Is(err, sarama.ErrClusterAuthorizationFailed):
		what = fmt.Sprintf("the broker refused the idempotent write to dead-letter topic %s: grant the consumer's principal WRITE on topic %s (brokers before Kafka 2.8 also want IDEMPOTENT_WRITE on the cluster)", t, t)
	case isSASLError(err):
		what = fmt.Sprintf("the broker did not accept the listener's SASL login while writing to dead-letter topic %s: check KAFKA_SASL_MECHANISM, KAFKA_SASL_USER and KAFKA_SASL_PASSWORD, and that the principal may WRITE on topic %s", t, t)
	case errors.Is(err, breaker.ErrBreakerOpen):
		// sarama's producer stops asking for a topic's partitions for 10 s
		// after three failures in a row; its own error hides the cause.
		what = fmt.Sprintf("the producer could not find the partitions of dead-letter topic %s three times in a row and waits 10 s before asking again: the topic is missing or has no leader; create it, or check the brokers", t)
	case isTooLarge(err):
		what = fmt.Sprintf("dead-letter envelope too large for topic %s even without the original value: raise max.message.bytes of topic %s (the listener reads it at start)", t, t)
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
