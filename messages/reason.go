package messages

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Reason says why a record was not processed the ordinary way: either it
// is broken (dead-lettered) or the service ignores it by design (skipped).
// The domain names its reasons (package inventory has the inventory
// events'). The values are stable strings meant for metric labels, the
// status page and dead-letter records.
//
// The pipeline reads a handler's reason through SkipReasonOf and
// ValidationReasonOf, which return it Clean: printable UTF-8 of at most
// MaxReasonBytes. A short fixed phrase, as every reason should be, comes
// through unchanged.
type Reason string

// MaxReasonBytes bounds a reason as the pipeline keeps it. A reason is a
// label value of every scrape, a key of the process's counters and a row of
// the status page, for the life of the process. 64 bytes holds every
// reason the service names (the longest are under 25; TestReasonLists
// checks each is its own Clean) with room for another handler's phrase, and
// is short enough to read in a dashboard's legend, while a value grown by a
// handler's mistake (an error's text, a dump of the input) stays one short
// line. It bounds each value, not how many there are: that stays the
// handler's to keep fixed.
const MaxReasonBytes = 64

// cutMark ends a reason Clean had to shorten, so a reader knows there was
// more.
const cutMark = "…"

// Clean returns r as the pipeline keeps it: valid UTF-8 (each run of bytes
// that is not becomes U+FFFD), every rune that does not print (control
// characters, line and paragraph separators, format characters such as
// bidirectional overrides, spaces other than ' ') written as its Go escape
// (\n, \x00, \u202e), and at most MaxReasonBytes bytes: a longer one is cut
// at a rune or escape boundary and ends in "…". The Prometheus client
// refuses a label value that is not valid UTF-8 when it gathers, failing
// every scrape, and a dead-letter envelope with one cannot be encoded. A
// clean reason is returned unchanged (Clean is idempotent), and so is
// every reason the service names.
func (r Reason) Clean() Reason {
	if len(r) <= MaxReasonBytes && printableASCII(string(r)) {
		return r
	}
	var b strings.Builder
	fits := 0 // the length of b's longest prefix that leaves room for cutMark
	for _, c := range strings.ToValidUTF8(string(r), string(utf8.RuneError)) {
		piece := string(c)
		if !strconv.IsPrint(c) {
			q := strconv.QuoteRune(c)
			piece = q[1 : len(q)-1]
		}
		if b.Len()+len(piece) > MaxReasonBytes {
			return Reason(b.String()[:fits] + cutMark)
		}
		b.WriteString(piece)
		if b.Len() <= MaxReasonBytes-len(cutMark) {
			fits = b.Len()
		}
	}
	return Reason(b.String())
}

// printableASCII reports whether s is all printable ASCII (' ' to '~'), the
// common case Clean returns without copying.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// ValidationError is why a record cannot be processed, ever (it is broken):
// the domain returns it wrapped with Permanent (see Invalid), so ClassOf
// reports ERROR_CLASS_PERMANENT, errors.As still finds the
// *ValidationError, and the record is dead-lettered with Reason (as
// ValidationReasonOf reads it: Clean).
type ValidationError struct {
	Reason Reason
	Detail string
}

func (e *ValidationError) Error() string { return string(e.Reason) + ": " + e.Detail }

// Invalid returns a permanent *ValidationError for reason.
func Invalid(r Reason, detail string) error {
	return Permanent(&ValidationError{Reason: r, Detail: detail})
}
