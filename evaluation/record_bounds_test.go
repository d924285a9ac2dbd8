package evaluation

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
)

// A record whose key or headers pass their bounds is refused before its
// value is parsed or anything is stored (the handler has no store here: a
// call would panic), whatever the value holds.
func TestHandleRefusesOversizedKeysAndHeadersUnparsed(t *testing.T) {
	h := &Handler{validation: inventory.DefaultValidationOptions()}
	value := newRealistic(t).event
	many := make([]consumer.Header, 300_000)
	for _, c := range []struct {
		name string
		rec  consumer.Record
		want messages.Reason
	}{
		{"600 KB key", consumer.Record{Key: []byte(strings.Repeat("k", 600_000)), Value: value}, inventory.ReasonKeyTooLarge},
		{"300,000 empty headers", consumer.Record{Key: []byte("host"), Value: value, Headers: many}, inventory.ReasonHeadersTooLarge},
	} {
		err := h.Handle(context.Background(), &c.rec)
		var ve *messages.ValidationError
		if !errors.As(err, &ve) || ve.Reason != c.want || messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_PERMANENT {
			t.Errorf("%s: %v, want a permanent %q", c.name, err, c.want)
		}
		if w := h.RecordBytes(&c.rec); w < int64(len(c.rec.Key)+len(c.rec.Headers)*consumer.HeaderOverhead) {
			t.Errorf("%s: weighs %d, less than its key and headers", c.name, w)
		}
	}
}
