package messages_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/patchflow/patchflow/messages"
)

// A reason is kept as printable UTF-8 of at most MaxReasonBytes: bytes that
// are not UTF-8 become U+FFFD, runes that do not print are escaped, a long
// reason is cut at a boundary and marked; a reason that is all that already
// is returned as it is.
func TestCleanReason(t *testing.T) {
	long := strings.Repeat("x", messages.MaxReasonBytes)
	cases := []struct{ in, want string }{
		{"", ""},
		{"reporter not allowed", "reporter not allowed"},
		{"clé non valide", "clé non valide"}, // printable UTF-8 stays
		{"bad \xff\xfe reason", "bad \ufffd reason"},
		{"line\nbreak\ttab\x00nul\x7f", `line\nbreak\ttab\x00nul\x7f`},
		{"abc\u202edcba", `abc\u202edcba`}, // a bidirectional override would reorder what a reader sees
		{"no\u00a0break", `no\u00a0break`},
		{long, long},
		{long + "y", long[:messages.MaxReasonBytes-len("…")] + "…"},
		// cut before a rune that would not fit, never inside it
		{strings.Repeat("é", 40), strings.Repeat("é", 30) + "…"},
		// cut before an escape that would not fit, never inside it
		{strings.Repeat("x", 58) + "\x01" + strings.Repeat("x", 10), strings.Repeat("x", 58) + "…"},
	}
	for _, c := range cases {
		got := string(messages.Reason(c.in).Clean())
		if got != c.want {
			t.Errorf("Reason(%q).Clean() = %q, want %q", c.in, got, c.want)
		}
		if !utf8.ValidString(got) || len(got) > messages.MaxReasonBytes {
			t.Errorf("Reason(%q).Clean() = %q: not valid UTF-8, or over %d bytes", c.in, got, messages.MaxReasonBytes)
		}
		if again := string(messages.Reason(got).Clean()); again != got {
			t.Errorf("Clean is not idempotent: %q, then %q", got, again)
		}
	}
}

// The pipeline reads a handler's reasons through SkipReasonOf and
// ValidationReasonOf, so those return them clean however the handler built
// its error (a constructor, a struct of its own, wrapped).
func TestReasonsEnterThePipelineClean(t *testing.T) {
	const raw = "bad\xff\n"
	const want messages.Reason = `bad` + "\ufffd" + `\n`
	for name, err := range map[string]error{
		"Skip":            messages.Skip(raw, "detail"),
		"Skipped wrapped": fmt.Errorf("handle: %w", &messages.Skipped{Reason: raw}),
	} {
		if r, ok := messages.SkipReasonOf(err); !ok || r != want {
			t.Errorf("%s: SkipReasonOf = %q, %v; want %q", name, r, ok, want)
		}
	}
	for name, err := range map[string]error{
		"Invalid":                 messages.Invalid(raw, "detail"),
		"ValidationError wrapped": fmt.Errorf("decode: %w", errors.Join(&messages.ValidationError{Reason: raw})),
	} {
		if r, ok := messages.ValidationReasonOf(err); !ok || r != want {
			t.Errorf("%s: ValidationReasonOf = %q, %v; want %q", name, r, ok, want)
		}
		if r := messages.DeadLetterReason(messages.ClassOf(messages.Permanent(err)), mustValidation(t, err)); r != want {
			t.Errorf("%s: dead-letter reason %q, want %q", name, r, want)
		}
	}
}

func mustValidation(t *testing.T, err error) messages.Reason {
	t.Helper()
	r, ok := messages.ValidationReasonOf(err)
	if !ok {
		t.Fatalf("%v is not a validation error", err)
	}
	return r
}
