package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/messages"
)

// KafkaDeadLetters writes dead-letter envelopes to a Kafka topic through a
// sarama SyncProducer, which returns only after the broker acknowledged the
// write (configure RequiredAcks = WaitForAll for durability).
//
// The envelope is keyed like the original record, so one host's dead letters
// stay in order. Headers carry the reason for tools that do not decode
// protobuf. An envelope too large for the topic is written again without the
// original value (value_truncated), so an oversized record cannot block its
// partition forever.
type KafkaDeadLetters struct {
	Producer sarama.SyncProducer
	Topic    string
}

// Write sends letter and waits for the acknowledgement.
func (k *KafkaDeadLetters) Write(ctx context.Context, letter *messages.DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := k.send(letter)
	if isTooLarge(err) && len(letter.GetValue()) > 0 {
		trimmed := proto.CloneOf(letter)
		trimmed.Value = nil
		trimmed.ValueTruncated = true
		err = k.send(trimmed)
	}
	return err
}

func (k *KafkaDeadLetters) send(letter *messages.DeadLetter) error {
	body, err := proto.Marshal(letter)
	if err != nil {
		return fmt.Errorf("encode dead letter: %w", err)
	}
	msg := &sarama.ProducerMessage{
		Topic: k.Topic,
		Value: sarama.ByteEncoder(body),
		Headers: []sarama.RecordHeader{
			{Key: []byte("patchflow-error-class"), Value: []byte(letter.GetErrorClass().String())},
			{Key: []byte("patchflow-original-topic"), Value: []byte(letter.GetOriginalTopic())},
			{Key: []byte("patchflow-original-partition"), Value: []byte(strconv.Itoa(int(letter.GetOriginalPartition())))},
			{Key: []byte("patchflow-original-offset"), Value: []byte(strconv.FormatInt(letter.GetOriginalOffset(), 10))},
		},
	}
	if letter.GetKey() != nil {
		msg.Key = sarama.ByteEncoder(letter.GetKey())
	}
	if _, _, err := k.Producer.SendMessage(msg); err != nil {
		return fmt.Errorf("write dead letter to %s: %w", k.Topic, err)
	}
	return nil
}

func isTooLarge(err error) bool {
	return errors.Is(err, sarama.ErrMessageSizeTooLarge) || errors.Is(err, sarama.ErrInvalidMessageSize)
}
