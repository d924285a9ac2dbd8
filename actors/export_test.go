package actors

import (
	"context"
	"time"
)

// Deliverable is deliverable, for the settle probe's tests.
var Deliverable = deliverable

// SpanWait is Span.wait without stop or end channels, with records
// admitted up to last.
func SpanWait(s *Span, ctx context.Context, offset, last int64) bool {
	return s.wait(ctx, offset, last, nil, nil)
}

// ResumeOf exposes resumeOf.
var ResumeOf = resumeOf

// Fingerprint exposes fingerprint.
var Fingerprint = fingerprint

// FormatClaims exposes formatClaims.
var FormatClaims = formatClaims

// OwnFailureForTest judges a failure of offset on partition 0 of topic
// "events" at dependency, as a partition actor does.
func OwnFailureForTest(d *Dependencies, dependency string, offset int64, since time.Time) bool {
	return d.ownFailure(dependency, recordID{"events", 0, offset}, since)
}
