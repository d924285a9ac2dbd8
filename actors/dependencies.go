package actors

import (
	"context"
	"time"

	"github.com/patchflow/patchflow/actors/blame"
	"github.com/patchflow/patchflow/messages"
)

// Dependencies is where the handler's calls to its dependencies (database,
// VMaaS, inventory, ...), their health checks and the records' own outcomes
// are booked, for the retry rule to judge whose each failure is (package
// blame; docs/architecture.md, "Whose failure"). It also tallies the
// records' judged failures for the listener's warnings.
//
// The domain reports each call (Observe) with the context it was made
// under: the handler's, or one derived from it, names the record that made
// it. A call under any other context counts for a dependency's recovery,
// never as evidence about a record (it might be the record's own). Safe for
// concurrent use.
type Dependencies struct {
	book     *blame.Book
	failures failureTally
}

// NewDependencies returns an empty book judging by cfg (zero fields take
// blame.DefaultConfig's).
func NewDependencies(cfg blame.Config) *Dependencies {
	return &Dependencies{book: blame.NewBook(cfg)}
}

// RecordsDependency is the name under which the handler's own outcomes are
// booked: a failure that names no dependency, or one nobody reported, is
// judged by how the other records fare.
const RecordsDependency = blame.Handler

// Book returns the evidence the rule judges by.
func (d *Dependencies) Book() *blame.Book { return d.book }

// Observe books one call to dependency made under ctx, which took took:
// served (it got an answer, even a refusal) or not.
func (d *Dependencies) Observe(ctx context.Context, dependency string, took time.Duration, served bool) {
	end := time.Now()
	d.book.Call(dependency, sourceOf(ctx), end.Add(-took), end, served)
}

// Probe books one health check of dependency that began at start and ended
// now. A check is evidence for the failures whose window it began in: keep
// it on the path the records' calls take, so it fails when they would.
func (d *Dependencies) Probe(dependency string, start time.Time, served bool) {
	d.book.Check(dependency, start, time.Now(), served)
}

// sourceOf names the record whose attempt ctx belongs to; the zero Source
// when it belongs to none.
func sourceOf(ctx context.Context) blame.Source {
	if ctx == nil {
		return blame.Source{}
	}
	if r, ok := messages.UrgencyOf(ctx).(runningRecord); ok {
		return blame.Source{Topic: r.env.topic, Partition: r.env.partition, Offset: r.offset}
	}
	return blame.Source{}
}
