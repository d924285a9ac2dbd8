package telemetry_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/telemetry"
	"github.com/patchflow/patchflow/messages"
)

type fixedOutbox struct{}

func (fixedOutbox) Claim(context.Context, int, []messages.OutboxKind) ([]messages.OutboxMessage, func(context.Context, messages.OutboxOutcome) error, error) {
	return nil, func(context.Context, messages.OutboxOutcome) error { return nil }, nil
}

func (fixedOutbox) Backlog(context.Context) (messages.OutboxBacklog, error) {
	return messages.OutboxBacklog{Pending: 7, Oldest: 90 * time.Second}, nil
}

type nopPublisher struct{}

func (nopPublisher) Publish(m []messages.OutboxMessage) []error { return make([]error, len(m)) }

// The relay's metrics are served once it is attached, with the backlog it
// read; the alert rules (deploy/prometheus) read two of them.
func TestOutboxMetricsAreServed(t *testing.T) {
	system := actors.NewActorSystem(slog.New(slog.DiscardHandler))
	defer system.Shutdown()
	r, err := actors.StartRelay(system, actors.RelayConfig{Store: fixedOutbox{}, Publisher: nopPublisher{}, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	m := telemetry.New()
	if err := m.AttachRelay(func() *actors.Relay { return r }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		families, err := m.Gatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, x := range f.GetMetric() {
				switch {
				case x.GetGauge() != nil:
					got[f.GetName()] = x.GetGauge().GetValue()
				case x.GetCounter() != nil:
					got[f.GetName()] = x.GetCounter().GetValue()
				}
			}
		}
		if got["patchflow_outbox_pending"] == 7 && got["patchflow_outbox_oldest_seconds"] == 90 {
			if _, ok := got["patchflow_outbox_published_total"]; !ok {
				t.Fatalf("patchflow_outbox_published_total not served: %v", got)
			}
			if _, ok := got["patchflow_outbox_failed_total"]; !ok {
				t.Fatalf("patchflow_outbox_failed_total not served: %v", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relay's backlog never reached /metrics: %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
