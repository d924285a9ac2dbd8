package evaluation_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/platform"
)

// requireFutureRefused asserts err dead-letters its record as broken, for
// ReasonFutureTimestamp.
func requireFutureRefused(t *testing.T, what string, err error) {
	t.Helper()
	var ve *messages.ValidationError
	if !errors.As(err, &ve) || ve.Reason != inventory.ReasonFutureTimestamp || messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_PERMANENT {
		t.Fatalf("%s: got %v, want a permanent validation error for %q", what, err, inventory.ReasonFutureTimestamp)
	}
}

// An upload stamped far ahead of the clock (a producer with a wrong clock,
// or hostile input) is a broken message: dead-lettered with its reason, not
// applied. Applied, it made every correct upload of the host after it
// "older than applied", skipped, until the clock passed its stamp. The
// time checked is the one the host's events are ordered by: the event's
// timestamp or, without one, the record's.
func TestUploadStampedInTheFutureIsRefusedNotApplied(t *testing.T) {
	f := newFixture(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	skew := inventory.DefaultValidationOptions().MaxFutureSkew
	f.mustHandle(t, platform.EventSpec{Type: "created", Timestamp: now.Add(-time.Hour)})

	future := platform.EventSpec{Type: "updated", Timestamp: now.Add(365 * 24 * time.Hour), Revision: 2}
	requireFutureRefused(t, "an update a year ahead", f.handle(t, future))
	if st := f.state(t); !st.LastEventTime.Equal(now.Add(-time.Hour)) {
		t.Fatalf("the refused update was stored: the host is at %v", st.LastEventTime)
	}
	// The next correct update is applied, not skipped as older than the
	// refused one.
	f.mustHandle(t, platform.EventSpec{Type: "updated", Timestamp: now, Revision: 3})
	f.checkMatchesDataset(t, 3)

	// Without an event timestamp the record's orders the host, and is
	// checked the same way.
	requireFutureRefused(t, "an update whose record is a year ahead", f.withRecordTimeOnly(t,
		platform.EventSpec{Type: "updated", Timestamp: now.Add(365 * 24 * time.Hour), Revision: 4}))
	f.checkMatchesDataset(t, 3)

	// Within the skew an upload is applied: a clock a little fast is not
	// broken, and the skew is all it can hold its host back.
	f.mustHandle(t, platform.EventSpec{Type: "updated", Timestamp: now.Add(skew / 2), Revision: 5})
	f.checkMatchesDataset(t, 5)
}

// withRecordTimeOnly handles spec with the event's timestamp removed, so
// that only the Kafka record's (spec.Timestamp) says when it happened.
func (f *fixture) withRecordTimeOnly(t *testing.T, spec platform.EventSpec) error {
	t.Helper()
	spec.OrgID, spec.HostID = "org-7", host
	body, err := f.ds.Event(spec, shape)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "timestamp")
	if body, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return f.handler.Handle(context.Background(), &consumer.Record{Topic: "events", Key: []byte(host), Value: body, Timestamp: spec.Timestamp})
}
