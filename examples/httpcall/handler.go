package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/patchflow/patchflow/consumer"
)

// Enricher is the handler: it POSTs each record's value to URL, with the
// record's key in the X-Record-Key header, and reads the answer.
//
//   - 2xx: the record is done.
//   - 400, 422: the service read the record and refuses it; no retry can
//     help, so it is dead-lettered (consumer.Permanent).
//   - Any other status (401 and 403 from a wrong credential or an auth
//     proxy, 404 from a wrong URL, 429, 5xx), a timeout, a refused
//     connection: the service, or the way to it, is in trouble, and every
//     record would meet it. The error names the dependency
//     (consumer.FailedIn), so the consumer can tell an outage (every record
//     fails: retried until it passes) from a record of its own trouble
//     (dead-lettered after Config.MaxAttempts). Were a 403 permanent, one
//     misconfiguration would dead-letter the whole stream.
//
// It reports every call (ReportDependenciesTo) under the record's context,
// which is what lets the consumer tell the two apart (other records served
// just after a failure make it the record's own), and what the dependency
// histogram shows.
type Enricher struct {
	URL    string
	Client *http.Client
	report func(ctx context.Context, dependency string, took time.Duration, err error)
}

var _ consumer.DependencyReporter = (*Enricher)(nil)

// dependency is the name the enricher's calls and failures go under.
const dependency = "enricher"

// ReportDependenciesTo implements consumer.DependencyReporter.
func (e *Enricher) ReportDependenciesTo(report func(context.Context, string, time.Duration, error)) {
	e.report = report
}

// Handle implements consumer.Handler.
func (e *Enricher) Handle(ctx context.Context, r *consumer.Record) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(r.Value))
	if err != nil {
		return consumer.Permanent(err)
	}
	req.Header.Set("X-Record-Key", string(r.Key))
	start := time.Now()
	err = e.call(req)
	if e.report != nil && ctx.Err() == nil {
		e.report(ctx, dependency, time.Since(start), err)
	}
	return consumer.FailedIn(dependency, err)
}

// call sends req and classes the outcome.
func (e *Enricher) call(req *http.Request) error {
	resp, err := e.Client.Do(req)
	if err != nil {
		return consumer.Transient(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusUnprocessableEntity:
		return consumer.Permanent(fmt.Errorf("%s refused the record: %s: %s", dependency, resp.Status, bytes.TrimSpace(body)))
	}
	return consumer.Transient(fmt.Errorf("%s: %s", dependency, resp.Status))
}
