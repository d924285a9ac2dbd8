package messages

import (
	"context"
	"errors"
)

// classified is an error carrying the class its creator chose.
type classified struct {
	class ErrorClass
	err   error
}

func (e *classified) Error() string { return e.err.Error() }
func (e *classified) Unwrap() error { return e.err }

// Permanent marks err as one that no retry can fix (malformed or invalid
// input): the record goes to the dead-letter topic after this attempt.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &classified{class: ErrorClass_ERROR_CLASS_PERMANENT, err: err}
}

// Transient marks err as worth retrying (a dependency is down or slow): the
// record is retried with backoff until its attempts run out.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &classified{class: ErrorClass_ERROR_CLASS_TRANSIENT, err: err}
}

// ClassOf returns the class of err: the outermost class set by Permanent or
// Transient, ERROR_CLASS_CANCELLED for a context error, otherwise
// ERROR_CLASS_UNKNOWN. A nil error has no class (UNSPECIFIED).
func ClassOf(err error) ErrorClass {
	if err == nil {
		return ErrorClass_ERROR_CLASS_UNSPECIFIED
	}
	var c *classified
	if errors.As(err, &c) {
		return c.class
	}
	if errors.Is(err, context.Canceled) {
		return ErrorClass_ERROR_CLASS_CANCELLED
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ErrorClass_ERROR_CLASS_TRANSIENT
	}
	return ErrorClass_ERROR_CLASS_UNKNOWN
}

// Retryable reports whether a failure of this class is worth another attempt.
func (c ErrorClass) Retryable() bool {
	switch c {
	case ErrorClass_ERROR_CLASS_TRANSIENT, ErrorClass_ERROR_CLASS_UNKNOWN, ErrorClass_ERROR_CLASS_PANIC:
		return true
	}
	return false
}
