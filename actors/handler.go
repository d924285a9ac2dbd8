package actors

import (
	"context"
	"time"

	"github.com/patchflow/patchflow/messages"
)

// Handler does the domain work for one record. It is the only thing the
// domain implements; it knows nothing about actors or offsets.
//
// Handle returns nil on success, and messages.Skip(reason, ...) for a record
// it ignores on purpose (finished, counted by reason, never dead-lettered).
// An error wrapped with messages.Permanent sends the record to the
// dead-letter topic at once. Any other error, and a panic, is retried with
// backoff, and counts towards MaxAttempts only when it is judged the
// record's own: other records' calls like it were served just after it
// (package blame). Name the dependency a failure came from with
// messages.FailedIn, and report the dependency's calls under the handler's
// ctx (see DependencyReporter), for a finer judgement; a failure naming none
// is judged by how the other records fare. ctx carries the attempt timeout
// and is cancelled when the partition drains past its cancel point; a
// handler must return promptly then, and the record is redelivered later.
//
// Handle runs concurrently for different records and must be safe for that.
// It may run more than once for the same record (retries, redelivery after a
// crash or rebalance), so its effects must be idempotent.
type Handler interface {
	Handle(ctx context.Context, record *messages.Record) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, record *messages.Record) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, record *messages.Record) error {
	return f(ctx, record)
}

// DependencyReporter is implemented by a Handler that can report each call
// to a dependency it names in its failures (messages.FailedIn): served (it
// got an answer, even one refusing the request) or failed (no answer: a
// refused connection, a timeout, a 5xx), under the context the call was
// made with (the handler's, or one derived from it: that is how the call is
// known to be its record's). The bridge gives it Dependencies.Observe when
// it is created.
type DependencyReporter interface {
	ReportDependenciesTo(observe func(ctx context.Context, dependency string, took time.Duration, served bool))
}
