// Package simulated is the proving ground's stand-in for the domain handler:
// it waits a latency (behind an optional capacity) and succeeds, so the
// pipeline can be measured without PostgreSQL or VMaaS. Its Extension adds
// it to the proving ground's listener build as LISTENER_HANDLER=simulated.
package simulated

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/downstream"
)

// PoisonPrefix marks a record value the simulated handler rejects as
// malformed, so demos and tests can exercise the dead-letter path.
const PoisonPrefix = "poison:"

// Handler stands in for the domain handler: it waits Latency plus a
// uniform random part of Jitter, honouring cancellation, and succeeds,
// except for values starting with PoisonPrefix, which fail permanently. It
// lets the pipeline be run and measured without PostgreSQL or VMaaS.
//
// With a Capacity, at most its limit of records wait their latency at once;
// the others queue for a slot, first come first served, and the queueing is
// part of Handle's time, as in front of a downstream with K workers.
//
// Pinned and Log are measurement knobs for the benchmark's crash-replay and
// memory scenarios; neither belongs in production.
type Handler struct {
	Latency, Jitter time.Duration
	// Capacity, when set, bounds the records served at once (see
	// downstream.Capacity; nil or limit 0: no bound). Its limit may change
	// while the handler runs. Pinned records take no slot.
	Capacity *downstream.Capacity
	// Pinned, when set, names records that wait until their context ends
	// (a drain cancels it, or the attempt deadline passes) instead of
	// Latency: each holds its partition's watermark for as long as it runs.
	Pinned func(*consumer.Record) bool
	// Log, when set, gets every record the handler completes, before Handle
	// returns success.
	Log *RecordLog
}

// PinAt pins the record at offset in every partition (Handler.Pinned).
func PinAt(offset int64) func(*consumer.Record) bool {
	return func(r *consumer.Record) bool { return r.Offset == offset }
}

// Handle implements consumer.Handler.
func (h Handler) Handle(ctx context.Context, r *consumer.Record) error {
	if bytes.HasPrefix(r.Value, []byte(PoisonPrefix)) {
		return messages.Permanent(fmt.Errorf("malformed event: value starts with %q", PoisonPrefix))
	}
	if h.Pinned != nil && h.Pinned(r) {
		<-ctx.Done()
		return ctx.Err()
	}
	if err := h.Capacity.Acquire(ctx); err != nil {
		return err
	}
	err := h.serve(ctx)
	h.Capacity.Release()
	if err != nil {
		return err
	}
	if h.Log != nil {
		if err := h.Log.Record(r); err != nil {
			return fmt.Errorf("simulated handler: record log: %w", err)
		}
	}
	return nil
}

// serve waits the record's service time: Latency plus a uniform random part
// of Jitter, unless ctx ends first.
func (h Handler) serve(ctx context.Context) error {
	d := h.Latency
	if h.Jitter > 0 {
		d += rand.N(h.Jitter)
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RecordLog is the simulated handler's record log: one line "partition
// offset" per completed record, appended to a file. Each line is one
// unbuffered write(2) on a file opened with O_APPEND, so a line is in the
// file (the kernel's page cache) once Record returns, and a SIGKILL of the
// process loses none already written; concurrent records never interleave
// their lines. Safe for concurrent use.
type RecordLog struct {
	f *os.File
}

// OpenRecordLog opens (creating if need be) the record log at path, for
// appending.
func OpenRecordLog(path string) (*RecordLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &RecordLog{f: f}, nil
}

// Record appends r's line.
func (l *RecordLog) Record(r *consumer.Record) error {
	var buf [48]byte
	b := strconv.AppendInt(buf[:0], int64(r.Partition), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.Offset, 10)
	b = append(b, '\n')
	_, err := l.f.Write(b)
	return err
}

// Close closes the file.
func (l *RecordLog) Close() error { return l.f.Close() }

// ForPipeline returns h as the actor pipeline's own handler, for the
// benchmarks that drive actors.Bridge directly rather than through a
// consumer.Consumer. Like the consumer, it copies no key or value.
func ForPipeline(h consumer.Handler) actors.Handler {
	return actors.HandlerFunc(func(ctx context.Context, r *messages.Record) error {
		rec := consumer.Record{Topic: r.GetTopic(), Partition: r.GetPartition(), Offset: r.GetOffset(), Key: r.GetKey(), Value: r.GetValue()}
		if ts := r.GetTimestamp(); ts != nil {
			rec.Timestamp = ts.AsTime()
		}
		return h.Handle(ctx, &rec)
	})
}
