package actors

import (
	"context"

	"github.com/patchflow/patchflow/messages"
)

// Handler does the domain work for one record. It is the only thing the
// domain implements; it knows nothing about actors or offsets.
//
// Handle returns nil on success. An error wrapped with messages.Permanent sends
// the record to the dead-letter topic at once; messages.Transient and
// unclassified errors are retried with backoff until the attempts run out,
// then dead-lettered. A panic counts as an unclassified failure. ctx is
// cancelled when the partition drains past its deadline; a handler must return
// promptly then, and the record is redelivered later.
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
