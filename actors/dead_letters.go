package actors

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/messages"
)

// DeadLetterWriter stores records the pipeline gave up on. Write returns nil
// only once the envelope is durably stored (for Kafka: acknowledged by the
// broker); only then does the record count as finished. On error the
// evaluation actor retries with backoff until the partition drains.
type DeadLetterWriter interface {
	Write(ctx context.Context, letter *messages.DeadLetter) error
}

// DeadLetterFunc adapts a function to DeadLetterWriter.
type DeadLetterFunc func(ctx context.Context, letter *messages.DeadLetter) error

// Write calls f.
func (f DeadLetterFunc) Write(ctx context.Context, letter *messages.DeadLetter) error {
	return f(ctx, letter)
}

// failureHistory is what the partition actor remembers about a record's
// failed attempts, to fill its dead-letter envelope.
type failureHistory struct {
	attempts     int32
	firstFailure time.Time
	lastFailure  time.Time
	lastError    string
	lastClass    messages.ErrorClass
}

func (h *failureHistory) add(now time.Time, class messages.ErrorClass, text string) {
	if h.firstFailure.IsZero() {
		h.firstFailure = now
	}
	h.lastFailure = now
	h.lastError = text
	h.lastClass = class
}

// newDeadLetter builds the envelope for record after its failures.
func newDeadLetter(record *messages.Record, h *failureHistory, group string) *messages.DeadLetter {
	return &messages.DeadLetter{
		OriginalTopic:     record.GetTopic(),
		OriginalPartition: record.GetPartition(),
		OriginalOffset:    record.GetOffset(),
		Key:               record.GetKey(),
		Value:             record.GetValue(),
		Headers:           record.GetHeaders(),
		OriginalTimestamp: record.GetTimestamp(),
		Error:             h.lastError,
		ErrorClass:        h.lastClass,
		Attempts:          h.attempts,
		FirstFailureTime:  timestamppb.New(h.firstFailure),
		LastFailureTime:   timestamppb.New(h.lastFailure),
		ConsumerGroup:     group,
		ValueSize:         int64(len(record.GetValue())),
	}
}
