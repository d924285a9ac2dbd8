package actors

import (
	"context"
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

// IsDraining reports whether a's drain has begun.
func IsDraining(a *PartitionActor) bool { return a.isDraining() }
