package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// Record is one Kafka record handed to a Handler. Key, Value and the
// headers' bytes belong to the pipeline: read them during Handle, copy what
// must outlive it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	// Timestamp is the record's Kafka timestamp; zero when it has none.
	Timestamp time.Time

	results []Message // Produce's, for this attempt
}

// Header is one Kafka record header.
type Header struct {
	Key, Value []byte
}

// Handler does the work of one record; it is the only thing a user of this
// package writes.
//
// Handle returns nil on success. It returns Skip(reason, ...) for a record
// it ignores on purpose: finished, committed and counted by reason (kept as
// printable UTF-8 of at most 64 bytes, see Skip), never dead-lettered.
// Permanent(err) dead-letters the record at once (a broken record). Any
// other error, and a panic, is retried with backoff, and
// counts towards Config.MaxAttempts only when it is judged the record's
// own: other records' calls to the dependency named with FailedIn (or,
// naming none, the other records themselves) were served just after it. A
// record that fails while everything fails (an outage) is retried until it
// passes; one whose failures nothing can judge is held and reported, never
// dead-lettered on a guess. A record whose own failures reach the limit is
// dead-lettered, with its failures and their verdicts in its envelope.
//
// ctx carries the attempt's deadline (Config.AttemptTimeout) and is
// cancelled when the partition is revoked or the consumer stops and the
// drain timeout runs short; return promptly then: the record is not
// committed and Kafka delivers it again.
//
// Handle runs concurrently for different records (in Config.Ordering
// "key", never for two records of one key at once) and may run more than
// once for one record (a retry, a redelivery after a crash or a rebalance):
// make its effects idempotent.
type Handler interface {
	Handle(ctx context.Context, record *Record) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, record *Record) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, record *Record) error { return f(ctx, record) }

// DependencyReporter is implemented by a Handler that reports each call it
// makes to a dependency (a database, an HTTP service): Run gives it report
// once, before the first record (a handler value given to two consumers
// reports to the one that ran last: give each its own). ctx is the context
// the call was made under: Handle's, or one derived from it, is how the call
// is known to be its record's (a call under another context counts only for
// the dependency's recovery). took is the call's duration; err is nil when
// the dependency served the call, an error classed Permanent when it
// answered with a refusal (it is up), and any other error when it gave no
// answer (a timeout, context.DeadlineExceeded included, a refused
// connection, a 503). A call the caller cancelled (context.Canceled) counts
// neither way.
//
// The retry rule reads these: a record's failure named with
// FailedIn(dependency, ...) counts as its own only when other records'
// calls to that dependency were served just after it; during a shared
// outage it is retried without limit, and when the dependency serves again
// the waiting records retry at once. The calls are also the metric
// patchflow_dependency_duration_seconds{dependency, result}. A new
// dependency needs only a new name.
type DependencyReporter interface {
	ReportDependenciesTo(report func(ctx context.Context, dependency string, took time.Duration, err error))
}

// DeadLetterObserver is implemented by a Handler that acts on each record
// the consumer gives up on (Permanent, the own-failure limit, a panic, a
// release by the operator): the consumer calls DeadLettered before it
// writes the record's dead letter, with the record and the failure's text.
// An error is retried as a failing dead-letter write is (with backoff, the
// record unfinished, the partition reported blocked), so what DeadLettered
// records is never lost; it may be called more than once for one record.
// The offsets of a batch no fetch can read reach it without key or value.
type DeadLetterObserver interface {
	DeadLettered(ctx context.Context, record *Record, failure string) error
}

// observedDeadLetters calls o (when set) before each write to w, inside
// the dead letter's span (when t traces).
func observedDeadLetters(o DeadLetterObserver, t *tracing, w actors.DeadLetterWriter) actors.DeadLetterWriter {
	if o == nil && t == nil {
		return w
	}
	return actors.DeadLetterFunc(func(ctx context.Context, letter *messages.DeadLetter) error {
		rec := Record{Topic: letter.GetOriginalTopic(), Partition: letter.GetOriginalPartition(), Offset: letter.GetOriginalOffset(),
			Key: letter.GetKey(), Value: letter.GetValue()}
		if ts := letter.GetOriginalTimestamp(); ts != nil {
			rec.Timestamp = ts.AsTime()
		}
		for _, h := range letter.GetHeaders() {
			rec.Headers = append(rec.Headers, Header{Key: h.GetKey(), Value: h.GetValue()})
		}
		write := func(ctx context.Context) error {
			if o != nil {
				if err := o.DeadLettered(ctx, &rec, letter.GetError()); err != nil {
					return fmt.Errorf("before the dead letter: %w", err)
				}
			}
			return w.Write(ctx, letter)
		}
		if t == nil {
			return write(ctx)
		}
		return t.deadLettered(ctx, &rec, letter.GetError(), write)
	})
}

// Permanent marks err as one no retry can fix (a malformed or invalid
// record): the record is dead-lettered after this attempt, with err's text.
func Permanent(err error) error { return messages.Permanent(err) }

// Transient marks err as worth retrying (a dependency is down or slow).
func Transient(err error) error { return messages.Transient(err) }

// FailedIn names the dependency err came from (a short name, the one the
// handler reports calls under), so the retry rule can tell a shared outage
// from the record's own trouble. A failure in a dependency is worth
// retrying: an err without a class becomes Transient (one classed
// Permanent, or a cancellation, keeps its class). It then counts towards
// Config.MaxAttempts only while the dependency serves other calls, and
// never when err says a connection could not be made (refused, or a dial
// that failed other than by timing out: the record is held); class a
// refusal by an address the record itself names Permanent.
func FailedIn(dependency string, err error) error {
	if messages.ClassOf(err) == messages.ErrorClass_ERROR_CLASS_UNKNOWN {
		err = messages.Transient(err)
	}
	return messages.FailedIn(dependency, err)
}

// Skip returns the error a Handler gives for a record it ignores on
// purpose: the record is finished and committed, counted under reason (a
// short, fixed string: it is a metric label), never dead-lettered. The
// reason is counted and labelled as messages.Reason.Clean returns it: bytes
// that are not UTF-8 become U+FFFD, characters that do not print are
// escaped (a newline as \n), and it is cut to messages.MaxReasonBytes (64),
// so no reason can fail a scrape of /metrics. The reason of a broken
// record's *messages.ValidationError is kept the same way.
func Skip(reason, detail string) error { return messages.Skip(messages.Reason(reason), detail) }

// RecordSizer is implemented by a Handler that knows how much memory
// handling a record takes: the record decoded, what its calls send and the
// answers they read, as an upper bound in bytes. The consumer charges that
// much of Config.InFlightBytes before it admits the record and gives it
// back when the record finishes. RecordBytes must be cheap and a pure
// function of the record (it is called more than once per record). A
// handler without it is charged the record's wire size (key, value and
// headers), which undercounts whatever its decoding adds.
type RecordSizer interface {
	RecordBytes(record *Record) int64
}

// HeaderOverhead is what one header costs in memory beyond its key and
// value; a RecordSizer adds it per header.
const HeaderOverhead = actors.HeaderOverhead

// adapter runs a Handler for the pipeline: the pipeline's records are
// protobuf messages; a Handler sees a Record with a time.Time. With t, each
// attempt runs in its span.
type adapter struct {
	h       Handler
	t       *tracing
	results *results
}

func (a adapter) Handle(ctx context.Context, r *messages.Record) error {
	rec := recordOf(r)
	var err error
	if a.t != nil {
		err = a.t.handle(ctx, a.h, &rec)
	} else {
		err = a.h.Handle(ctx, &rec)
	}
	if err == nil && rec.results != nil {
		return a.results.produce(ctx, &rec)
	}
	return err
}

// sizedAdapter is the adapter of a Handler that is a RecordSizer.
type sizedAdapter struct {
	adapter
	sizer RecordSizer
}

func (a sizedAdapter) RecordBytes(r *messages.Record) int64 {
	rec := recordOf(r)
	return a.sizer.RecordBytes(&rec)
}

// adapt wraps h for the pipeline, keeping its RecordSizer.
func adapt(h Handler, t *tracing, p *results) actors.Handler {
	if b, ok := h.(batched); ok {
		h = b // the batches' handler; the sizer is the user's
		if s, ok := b.b.h.(RecordSizer); ok {
			return sizedAdapter{adapter{h, t, p}, s}
		}
		return adapter{h, t, p}
	}
	if s, ok := h.(RecordSizer); ok {
		return sizedAdapter{adapter{h, t, p}, s}
	}
	return adapter{h, t, p}
}

// recordOf is the Record a Handler sees of a pipeline record.
func recordOf(r *messages.Record) Record {
	rec := Record{Topic: r.GetTopic(), Partition: r.GetPartition(), Offset: r.GetOffset(), Key: r.GetKey(), Value: r.GetValue()}
	if ts := r.GetTimestamp(); ts != nil {
		rec.Timestamp = ts.AsTime()
	}
	if hs := r.GetHeaders(); len(hs) > 0 {
		rec.Headers = make([]Header, len(hs))
		for i, h := range hs {
			rec.Headers[i] = Header{Key: h.GetKey(), Value: h.GetValue()}
		}
	}
	return rec
}

// served reads a reported call as the retry rule does: served, not served,
// or (a cancellation) nothing.
func served(err error) (ok, counts bool) {
	switch messages.ClassOf(err) {
	case messages.ErrorClass_ERROR_CLASS_UNSPECIFIED, messages.ErrorClass_ERROR_CLASS_PERMANENT:
		return true, true
	case messages.ErrorClass_ERROR_CLASS_CANCELLED:
		return false, false
	}
	return false, true
}
