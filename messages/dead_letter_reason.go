package messages

import (
	"errors"
	"slices"
)

// Reasons a record is dead-lettered besides the validation reasons: the
// class of the failure that decided. With ValidationReasons they make the
// bounded set of DeadLetterReasons, fit for a metric label: a reason never
// carries an error's text (that is in the envelope's error).
const (
	// ReasonPermanent: a permanent failure that is not a broken message
	// (the host unknown to inventory, a request VMaaS refuses...).
	ReasonPermanent Reason = "permanent"
	// ReasonTransient: the record's own failures reached the limit
	// (LISTENER_MAX_ATTEMPTS), the last a transient one: a dependency
	// failing this record while it served others.
	ReasonTransient Reason = "transient"
	// ReasonUnknown: the own failures reached the limit, the last an
	// unclassified error (or a failure without a class).
	ReasonUnknown Reason = "unknown"
	// ReasonPanic: the own failures reached the limit, the last a panic of
	// the handler.
	ReasonPanic Reason = "panic"
)

// DeadLetterReasons returns every reason a record is dead-lettered with:
// the validation reasons, in the order DecodeInventoryEvent checks them,
// then the failure classes.
func DeadLetterReasons() []Reason {
	return append(ValidationReasons(), ReasonPermanent, ReasonTransient, ReasonUnknown, ReasonPanic)
}

// DeadLetterReason returns the reason a record is dead-lettered for after a
// last failure of class, whose validation reason is validation (empty for
// a failure that is not a broken message). It is always one of
// DeadLetterReasons: a permanent failure with a validation reason outside
// ValidationReasons counts as ReasonPermanent.
func DeadLetterReason(class ErrorClass, validation Reason) Reason {
	switch class {
	case ErrorClass_ERROR_CLASS_PERMANENT:
		if slices.Contains(ValidationReasons(), validation) {
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
// *ValidationError in its chain, however wrapped), and with which reason.
func ValidationReasonOf(err error) (Reason, bool) {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Reason, true
	}
	return "", false
}
