package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchflow/patchflow/actors"
)

// OutboxStatus is the outbox relay's line on /status.
type OutboxStatus struct {
	// Pending and OldestSeconds are the messages waiting and the oldest
	// one's age, as last read (every relay interval).
	Pending       int64   `json:"pending"`
	OldestSeconds float64 `json:"oldest_seconds"`
	Published     int64   `json:"published"`
	Failed        int64   `json:"failed"`
	// Refused counts the messages the broker refused for good, kept aside
	// in the outbox for a person (outbox.refused says why).
	Refused int64 `json:"refused"`
	// LastError is the last round's failure; absent after a clean round.
	LastError string `json:"last_error,omitempty"`
	// HeldKinds are the kinds left out of the rounds for a while after
	// their topic refused a message.
	HeldKinds []string `json:"held_kinds,omitempty"`
}

// relaySource returns the running relay, nil before it starts.
type relaySource = func() *actors.Relay

// AttachRelay adds the outbox relay's metrics (patchflow_outbox_*) and
// its /status line; relay returns the running relay, nil while there is
// none. A second call changes the source only.
func (m *Metrics) AttachRelay(relay relaySource) error {
	first := m.relay.Load() == nil
	m.relay.Store(&relay)
	if !first {
		return nil
	}
	return m.Registry.Register(&outboxCollector{m: m})
}

// outboxStatus is the relay's state for /status; nil without a relay.
func (m *Metrics) outboxStatus() *OutboxStatus {
	src := m.relay.Load()
	if src == nil {
		return nil
	}
	r := (*src)()
	if r == nil {
		return nil
	}
	s := r.State()
	o := &OutboxStatus{Pending: s.Backlog.Pending, OldestSeconds: s.Backlog.Oldest.Seconds(), Published: s.Published,
		Failed: s.Failed, Refused: s.Backlog.Refused, LastError: s.LastError}
	for _, k := range s.HeldKinds {
		o.HeldKinds = append(o.HeldKinds, string(k))
	}
	return o
}

var (
	outboxPendingDesc = prometheus.NewDesc("patchflow_outbox_pending",
		"Messages waiting in the outbox to be published (read every relay interval).", nil, nil)
	outboxOldestDesc = prometheus.NewDesc("patchflow_outbox_oldest_seconds",
		"Age of the oldest message waiting in the outbox; 0 when none waits (read every relay interval).", nil, nil)
	outboxPublishedDesc = prometheus.NewDesc("patchflow_outbox_published_total",
		"Outbox messages the brokers acknowledged.", nil, nil)
	outboxFailedDesc = prometheus.NewDesc("patchflow_outbox_failed_total",
		"Outbox messages the producer could not publish (each is tried again).", nil, nil)
	outboxRefusedDesc = prometheus.NewDesc("patchflow_outbox_refused",
		"Outbox messages the broker refused for good (too large, invalid), kept aside for a person (read every relay interval).", nil, nil)
)

type outboxCollector struct{ m *Metrics }

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- outboxPendingDesc
	ch <- outboxOldestDesc
	ch <- outboxPublishedDesc
	ch <- outboxFailedDesc
	ch <- outboxRefusedDesc
}

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.outboxStatus()
	if s == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(outboxPendingDesc, prometheus.GaugeValue, float64(s.Pending))
	ch <- prometheus.MustNewConstMetric(outboxOldestDesc, prometheus.GaugeValue, s.OldestSeconds)
	ch <- prometheus.MustNewConstMetric(outboxPublishedDesc, prometheus.CounterValue, float64(s.Published))
	ch <- prometheus.MustNewConstMetric(outboxFailedDesc, prometheus.CounterValue, float64(s.Failed))
	ch <- prometheus.MustNewConstMetric(outboxRefusedDesc, prometheus.GaugeValue, float64(s.Refused))
}
