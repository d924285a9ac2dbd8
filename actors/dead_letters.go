package actors

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/messages"
)

// DeadLetterWriter stores records the pipeline gave up on. Write returns nil
// only once the envelope is durably stored (for Kafka: acknowledged by the
// broker); only then does the record count as finished. Write must return
// promptly once ctx is done (the partition is draining). On error the
// partition actor retries with backoff up to BackoffMax for as long as the
// claim lasts; the record stays unfinished meanwhile, so nothing is lost,
// and the partition reports itself blocked (see PartitionState).
type DeadLetterWriter interface {
	Write(ctx context.Context, letter *messages.DeadLetter) error
}

// DeadLetterFunc adapts a function to DeadLetterWriter.
type DeadLetterFunc func(ctx context.Context, letter *messages.DeadLetter) error

// Write calls f.
func (f DeadLetterFunc) Write(ctx context.Context, letter *messages.DeadLetter) error {
	return f(ctx, letter)
}

// History bounds: a record retried for hours through a shared outage keeps
// its first attempts (how it started) and its latest (how it ended).
const (
	historyHead = 3
	historyTail = 7
)

// failureHistory is what the partition actor remembers about a record's
// failed attempts, to decide on retries and to fill its dead-letter
// envelope. Its size is bounded by historyHead + historyTail entries.
type failureHistory struct {
	head, tail []*messages.FailedAttempt // tail is a ring once full
	next       int                       // ring position of the oldest tail entry
	dropped    int32
	own        int32 // failures that counted towards the own-failure limit
	last       *messages.FailedAttempt
	first      time.Time
}

func (h *failureHistory) add(f *messages.FailedAttempt) {
	if h.first.IsZero() {
		h.first = f.GetTime().AsTime()
	}
	if f.GetOwn() {
		h.own++
	}
	h.last = f
	switch {
	case len(h.head) < historyHead:
		h.head = append(h.head, f)
	case len(h.tail) < historyTail:
		h.tail = append(h.tail, f)
	default:
		h.tail[h.next] = f
		h.next = (h.next + 1) % historyTail
		h.dropped++
	}
}

// replace puts judged in the place of old (the same attempt, now judged):
// entries are never changed once recorded, since the partition's state
// publishes them to other goroutines.
func (h *failureHistory) replace(old, judged *messages.FailedAttempt) {
	if judged.GetOwn() {
		h.own++
	}
	for i, f := range h.head {
		if f == old {
			h.head[i] = judged
		}
	}
	for i, f := range h.tail {
		if f == old {
			h.tail[i] = judged
		}
	}
	if h.last == old {
		h.last = judged
	}
}

// lastAttempt returns the last failed attempt; nil when there was none (h nil).
func (h *failureHistory) lastAttempt() *messages.FailedAttempt {
	if h == nil {
		return nil
	}
	return h.last
}

// ownCount returns the failures that counted as own (0 for a nil h).
func (h *failureHistory) ownCount() int32 {
	if h == nil {
		return 0
	}
	return h.own
}

// attempts returns the recorded failures, oldest first.
func (h *failureHistory) attempts() []*messages.FailedAttempt {
	out := make([]*messages.FailedAttempt, 0, len(h.head)+len(h.tail))
	out = append(out, h.head...)
	out = append(out, h.tail[h.next:]...)
	return append(out, h.tail[:h.next]...)
}

// recordedError is an attempt's error text as the failure history keeps
// it: valid UTF-8 (see encodable), at most maxErrorText bytes, a longer one
// cut with its marker. A handler's error may quote its record, and the
// record may be megabytes.
func recordedError(text string) string { return messages.CutText(validUTF8(text), maxErrorText) }

// NewDeadLetter returns the envelope the partition actor builds for record
// after failures (oldest first; at least one), given up for reason by
// group: each error text as the actor records it (recordedError), the
// history bounded as it keeps it. For tools and tests that build envelopes
// as the pipeline does; the writer may still cut it to fit its topic
// (FitDeadLetter).
func NewDeadLetter(record *messages.Record, failures []*messages.FailedAttempt, group string, reason messages.Reason) *messages.DeadLetter {
	h := &failureHistory{}
	for _, f := range failures {
		f = proto.CloneOf(f)
		f.Error = recordedError(f.GetError())
		h.add(f)
	}
	return newDeadLetter(record, h, group, reason)
}

// newDeadLetter builds the envelope for record after its failures (h is
// never nil: a record is dead-lettered only after a failure), given up for
// reason. Its texts are valid UTF-8 (see encodable).
func newDeadLetter(record *messages.Record, h *failureHistory, group string, reason messages.Reason) *messages.DeadLetter {
	last := h.last
	return &messages.DeadLetter{
		OriginalTopic:     record.GetTopic(),
		OriginalPartition: record.GetPartition(),
		OriginalOffset:    record.GetOffset(),
		Key:               record.GetKey(),
		Value:             record.GetValue(),
		Headers:           record.GetHeaders(),
		OriginalTimestamp: record.GetTimestamp(),
		Error:             validUTF8(last.GetError()),
		ErrorClass:        last.GetErrorClass(),
		Attempts:          last.GetAttempt(),
		FirstFailureTime:  timestamppb.New(h.first),
		LastFailureTime:   last.GetTime(),
		ConsumerGroup:     group,
		ValueSize:         int64(len(record.GetValue())),
		History:           encodable(h.attempts()),
		HistoryDropped:    h.dropped,
		OwnFailures:       h.own,
		Reason:            validUTF8(string(reason)),
	}
}

// encodable returns attempts with their error and dependency valid UTF-8,
// copying only the attempts that need it (recorded ones are shared, never
// changed). A handler's error text often quotes its input, and protobuf
// refuses to encode a string field that is not UTF-8: the envelope's write
// would fail every time, and its record would hold the partition for good.
func encodable(attempts []*messages.FailedAttempt) []*messages.FailedAttempt {
	for i, f := range attempts {
		if utf8.ValidString(f.GetError()) && utf8.ValidString(f.GetDependency()) {
			continue
		}
		c := proto.CloneOf(f)
		c.Error, c.Dependency = validUTF8(c.Error), validUTF8(c.Dependency)
		attempts[i] = c
	}
	return attempts
}

// validUTF8 is s with each run of bytes that are not UTF-8 as U+FFFD.
func validUTF8(s string) string { return strings.ToValidUTF8(s, string(utf8.RuneError)) }
