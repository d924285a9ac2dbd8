package messages

import "context"

// Urgency says whether the work of a context is urgent now: the pipeline
// marks the record that holds its partition's committed offset back (the
// oldest unfinished one), so that the handler's shared resources (database
// connections, say) serve it before records that finished out of order
// anyway. It may change while the work runs: a record becomes urgent when the
// records before it finish. Safe for concurrent use.
type Urgency interface {
	Urgent() bool
}

type urgencyKey struct{}

// WithUrgency returns ctx carrying u.
func WithUrgency(ctx context.Context, u Urgency) context.Context {
	return context.WithValue(ctx, urgencyKey{}, u)
}

// UrgencyOf returns the urgency ctx carries, or nil. A resource that queues
// work looks it up once, when the work starts to wait, and asks Urgent each
// time it chooses whom to serve.
func UrgencyOf(ctx context.Context) Urgency {
	u, _ := ctx.Value(urgencyKey{}).(Urgency)
	return u
}
