package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
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

// CutQuotes exposes cutQuotes.
var CutQuotes = cutQuotes

// MessageSize exposes messageSize.
var MessageSize = messageSize

// FitBudget exposes fitBudget.
var FitBudget = fitBudget

// DeadLetterMessage exposes deadLetterMessage.
var DeadLetterMessage = deadLetterMessage

// Bounds of what a dead letter quotes, for the tests of FitDeadLetter.
const (
	MaxErrorText     = maxErrorText
	MaxRecordKey     = maxRecordKey
	KeepBytes        = keepBytes
	HistoryTextBytes = historyTextBytes
	ErrorTextBytes   = errorTextBytes
)

// AdmitUnreadable hands the partition actor at pid an offset no fetch can
// read, as the bridge does (its worker's AdmitUnreadable).
func AdmitUnreadable(root *actor.RootContext, pid *actor.PID, offset int64, limit int) {
	root.Send(pid, &unreadableAdmitted{offset: offset, limit: limit})
}
