package messages

import (
	"context"
	"errors"
	"net"
	"syscall"
)

// Dependencies a handler can name in a failure (FailedIn). The pipeline
// compares a record's failures with what the same dependency did for other
// records: a shared outage is retried without limit, a failure of the
// record's own is not.
const (
	DependencyDatabase = "database"
	// DependencyNetwork is what the pipeline names a failure that names no
	// dependency but could not reach one (DialFailed).
	DependencyNetwork = "network"
)

// dependencyError names the dependency a failure came from.
type dependencyError struct {
	dependency string
	err        error
}

func (e *dependencyError) Error() string { return e.err.Error() }
func (e *dependencyError) Unwrap() error { return e.err }

// FailedIn records that err came from dependency (one of the Dependency
// constants, or another short name). The class of err is unchanged.
func FailedIn(dependency string, err error) error {
	if err == nil {
		return nil
	}
	return &dependencyError{dependency: dependency, err: err}
}

// DependencyOf returns the innermost dependency named by FailedIn in err's
// chain (the one closest to the failing call), or "" when none is named.
func DependencyOf(err error) string {
	name := ""
	for err != nil {
		if d, ok := err.(*dependencyError); ok {
			name = d.dependency
		}
		err = errors.Unwrap(err)
	}
	return name
}

// DialFailed reports whether err's tree (errors.Join and several %w
// included) says a connection was not made or was lost to the network: a
// failed dial (through a proxy too) or name lookup, timed out or not, a
// refused connection, an unreachable host or network. A failure naming no
// dependency that is one is booked as a failure of DependencyNetwork, and
// judged with the other failures there as well as by the records handled:
// an outage of a service only some records need must not read as their own
// failures as soon as a second record fails there. An HTTP client whose
// request (or Client.Timeout) ends before its dialer gives up says only
// "context deadline exceeded": not one.
func DialFailed(err error) bool {
	if err == nil {
		return false
	}
	if anyInTree(err, func(e error) bool { op, ok := e.(*net.OpError); return ok && op.Op == "dial" }) {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.ECONNREFUSED, syscall.EHOSTUNREACH, syscall.ENETUNREACH} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// CouldNotConnect reports whether err says, of the ways DialFailed reads,
// one that no record causes where the service was chosen by configuration:
// a refused connection, an unreachable host or network, a failed dial or
// lookup. Such a failure is never judged the record's own: where the other
// records were served, it is held.
//
// Not one: a timeout of any kind (the attempt's deadline, which a hanging
// record runs out, ends its dials too, and a timeout cannot say whose
// deadline it was), a name that does not exist, an address that does not
// parse (a record can carry either; a configured one fails every record,
// which is shared anyway), and a reset, an EOF or a timeout on an open
// connection (a record's request can cause those). A handler that dials an
// address the record chose should class a refusal there Permanent: counted
// as could not connect, its record is held, not dead-lettered.
func CouldNotConnect(err error) bool {
	if !DialFailed(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, syscall.ETIMEDOUT) {
		return false
	}
	return !anyInTree(err, func(e error) bool {
		switch e := e.(type) {
		case *net.DNSError:
			return e.IsNotFound || e.IsTimeout
		case *net.AddrError, *net.ParseError, net.UnknownNetworkError, net.InvalidAddrError:
			return true
		}
		return false
	})
}

// anyInTree reports whether match holds for err or any error it wraps,
// through every branch of a join.
func anyInTree(err error, match func(error) bool) bool {
	if err == nil {
		return false
	}
	if match(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return anyInTree(u.Unwrap(), match)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if anyInTree(e, match) {
				return true
			}
		}
	}
	return false
}

// congestedError marks a failure spent waiting for a resource every record
// shares.
type congestedError struct{ err error }

func (e *congestedError) Error() string { return e.err.Error() }
func (e *congestedError) Unwrap() error { return e.err }

// Congested marks err as a failure spent waiting for a resource every record
// shares, such as a free connection of a pool: it says the process is
// congested, nothing about the record or the dependency, so it never counts
// as the record's own. The class of err is unchanged.
func Congested(err error) error {
	if err == nil {
		return nil
	}
	return &congestedError{err: err}
}

// IsCongestion reports whether err was marked with Congested.
func IsCongestion(err error) bool {
	var c *congestedError
	return errors.As(err, &c)
}

// Skipped is what a handler returns for a record the service deliberately
// ignores, wholly (a filter, an event already superseded) or in part (a host
// stored with nothing to evaluate): the record is finished and committed,
// counted by Reason (one of SkipReasons; as SkipReasonOf reads it: Clean),
// and never dead-lettered. It is not a failure: nothing is retried and
// nothing is wrong with the record. DecodeInventoryEvent returns one for the
// events its filters leave out.
type Skipped struct {
	Reason Reason
	Detail string
}

func (s *Skipped) Error() string {
	if s.Detail == "" {
		return "skipped: " + string(s.Reason)
	}
	return "skipped: " + string(s.Reason) + ": " + s.Detail
}

// Skip returns a *Skipped for reason: a short fixed phrase, since it
// becomes a metric label. The pipeline counts it as reason.Clean() returns
// it (printable UTF-8, at most MaxReasonBytes), so a reason that is not
// valid UTF-8, or runs long, cannot fail a scrape of /metrics.
func Skip(reason Reason, detail string) error {
	return &Skipped{Reason: reason, Detail: detail}
}

// SkipReasonOf reports whether err says the record was skipped, and why,
// Clean: this is where a handler's skip reason enters the pipeline, to be
// counted by it and become a metric label.
func SkipReasonOf(err error) (Reason, bool) {
	if err == nil {
		return "", false
	}
	var s *Skipped
	if errors.As(err, &s) {
		return s.Reason.Clean(), true
	}
	return "", false
}
