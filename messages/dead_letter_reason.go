package messages

import (
	"errors"
)

// Reasons a record is dead-lettered besides the validation reasons its
// domain names (ValidationError): the class of the failure that decided.
// With the domain's validation reasons they make a bounded set, fit for a
// metric label: a reason never carries an error's text (that is in the
// envelope's error).
const (
	// ReasonPermanent: a permanent failure that is not a broken message
	// (the host unknown to inventory, a request VMaaS refuses...).
	ReasonPermanent Reason = "permanent"
	// ReasonTransient: the record's own failures reached the limit
	// (the consumer's MaxAttempts), the last a transient one: a dependency
	// failing this record while it served others.
	ReasonTransient Reason = "transient"
	// ReasonUnknown: the own failures reached the limit, the last an
	// unclassified error (or a failure without a class).
	ReasonUnknown Reason = "unknown"
	// ReasonPanic: the own failures reached the limit, the last a panic of
	// the handler.
	ReasonPanic Reason = "panic"
	// ReasonReleased: an operator released the record (it was held, or
	// retried through an outage) to the dead-letter topic.
	ReasonReleased Reason = "released"
	// ReasonUnreadableBatch: the record's batch decompresses past the
	// consumer's limit (a compression bomb, or a batch larger than the
	// limit allows): no fetch can read it, so the offset is dead-lettered
	// by itself, without key or value, and the partition goes on past it.
	ReasonUnreadableBatch Reason = "batch over the decompression limit"
)

// DeadLetterReasons returns the reasons a record is dead-lettered with
// besides its domain's validation reasons: the failure classes, an
// operator's release, and a batch no fetch can read.
func DeadLetterReasons() []Reason {
	return []Reason{ReasonPermanent, ReasonTransient, ReasonUnknown, ReasonPanic, ReasonReleased, ReasonUnreadableBatch}
}

// DeadLetterReason returns the reason a record is dead-lettered for after a
// last failure of class, whose validation reason is validation (empty for
// a failure that is not a broken message): the validation reason for a
// permanent failure that has one, else one of DeadLetterReasons.
func DeadLetterReason(class ErrorClass, validation Reason) Reason {
	switch class {
	case ErrorClass_ERROR_CLASS_PERMANENT:
		if validation != "" {
			return validation
		}
		return ReasonPermanent
	case ErrorClass_ERROR_CLASS_TRANSIENT:
		return ReasonTransient
	case ErrorClass_ERROR_CLASS_PANIC:
		return ReasonPanic
	}
	return ReasonUnknown
}

// ValidationReasonOf reports whether err says the message is broken (a
// *ValidationError in its chain, however wrapped), and with which reason,
// Clean: this is where a handler's validation reason enters the pipeline,
// to become a dead-letter envelope's reason and a metric label.
func ValidationReasonOf(err error) (Reason, bool) {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Reason.Clean(), true
	}
	return "", false
}
