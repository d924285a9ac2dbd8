package persistence

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/messages"
)

// classify marks errors the pipeline should retry as transient: the
// database unreachable or restarting, a deadlock, a serialization failure,
// too many connections, a statement cancelled by a timeout. Anything else is
// left unclassified (retried, then dead-lettered). Every error is named as
// the database's (messages.FailedIn), so the pipeline can tell the database
// failing for everyone from failing for one record.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if messages.ClassOf(err) == messages.ErrorClass_ERROR_CLASS_UNKNOWN && isTransient(err) {
		err = messages.Transient(err)
	}
	if messages.DependencyOf(err) == "" {
		err = messages.FailedIn(messages.DependencyDatabase, err)
	}
	return err
}

func isTransient(err error) bool {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code.Class() {
		case "08", // connection exception
			"40", // transaction rollback: serialization failure, deadlock
			"53", // insufficient resources: too many connections, disk full
			"57": // operator intervention: admin shutdown, cannot connect now, query cancelled
			return true
		}
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || // the server went away mid-conversation
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
}

// Classify is classify for callers outside the package (the handler wraps
// its own database calls with it).
func Classify(err error) error { return classify(err) }

// poolWait marks err, from taking a connection of the pool, as congestion
// when the caller's context ended while it waited: every record competes
// for the same connections, so the wait says nothing about this record.
func poolWait(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return messages.Congested(err)
	}
	return err
}
