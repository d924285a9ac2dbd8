package actors

import "context"

// Deliverable is deliverable, for the settle probe's tests.
var Deliverable = deliverable

// SpanWait is Span.wait without stop or end channels.
func SpanWait(s *Span, ctx context.Context, offset int64) bool { return s.wait(ctx, offset, nil, nil) }

// ResumeOf exposes resumeOf.
var ResumeOf = resumeOf
