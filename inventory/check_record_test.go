package inventory_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
)

// A record whose key or headers pass their bounds is broken, with a reason
// of its own and a detail that quotes counts, never the field: a 600 KB key
// quoted whole would make its dead letter too large to write.
func TestCheckRecordBoundsKeyAndHeaders(t *testing.T) {
	opts := inventory.DefaultValidationOptions()
	cases := []struct {
		name                 string
		key                  []byte
		headers, headerBytes int
		want                 messages.Reason
	}{
		{"host id key", []byte("8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b"), 3, 120, ""},
		{"600 KB key", []byte(strings.Repeat("k", 600_000)), 0, 0, inventory.ReasonKeyTooLarge},
		{"300,000 empty headers", nil, 300_000, 0, inventory.ReasonHeadersTooLarge},
		{"one 100 KB header", nil, 1, 100_000, inventory.ReasonHeadersTooLarge},
		{"at the bounds", []byte(strings.Repeat("k", opts.MaxKeyBytes)), opts.MaxHeaders, opts.MaxHeaderBytes, ""},
	}
	for _, c := range cases {
		err := inventory.CheckRecord(c.key, c.headers, c.headerBytes, opts)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var ve *messages.ValidationError
		if !errors.As(err, &ve) || ve.Reason != c.want || messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_PERMANENT {
			t.Errorf("%s: %v, want a permanent %q", c.name, err, c.want)
			continue
		}
		if len(err.Error()) > 200 {
			t.Errorf("%s: the error quotes %d bytes: %.80q…", c.name, len(err.Error()), err.Error())
		}
	}
}
