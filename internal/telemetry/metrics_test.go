package telemetry

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
)

// samples gathers c and returns every counter or gauge sample of the named
// families as `name{label="value",...}` -> value.
func samples(t *testing.T, c prometheus.Collector, names ...string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+f.GetName()+" ") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			v := m.GetCounter().GetValue()
			if m.GetGauge() != nil {
				v = m.GetGauge().GetValue()
			}
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// Skipped records are an outcome of their own, and counted by reason: every
// reason the evaluating handler gives is exported from the start (at 0),
// and a reason it does not know (another handler's) as it comes. Each
// topic's records are counted under its own label.
func TestSkippedRecordsByReason(t *testing.T) {
	snap := actors.StatsSnapshot{ByTopic: map[string]actors.TopicStatsSnapshot{
		"inventory": {Succeeded: 5, Skipped: 4, DeadLettered: 2, Abandoned: 1, Resumed: 6,
			SkippedByReason: map[string]int64{string(inventory.ReasonReporterNotAllowed): 3, "a reason of another handler": 1}},
		"other": {Succeeded: 7, Fenced: 1},
	}}
	c := &bridgeCollector{partitions: func() []actors.PartitionState { return nil }, stats: func() actors.StatsSnapshot { return snap },
		skipReasons: inventory.SkipReasons()}
	want := map[string]float64{
		`patchflow_records_total{outcome="ok",topic="inventory"}`:                                 5,
		`patchflow_records_total{outcome="skipped",topic="inventory"}`:                            4,
		`patchflow_records_total{outcome="dead_lettered",topic="inventory"}`:                      2,
		`patchflow_records_total{outcome="abandoned",topic="inventory"}`:                          1,
		`patchflow_records_total{outcome="resumed",topic="inventory"}`:                            6,
		`patchflow_records_total{outcome="fenced",topic="inventory"}`:                             0,
		`patchflow_records_skipped_total{reason="a reason of another handler",topic="inventory"}`: 1,
		`patchflow_records_total{outcome="ok",topic="other"}`:                                     7,
		`patchflow_records_total{outcome="skipped",topic="other"}`:                                0,
		`patchflow_records_total{outcome="dead_lettered",topic="other"}`:                          0,
		`patchflow_records_total{outcome="abandoned",topic="other"}`:                              0,
		`patchflow_records_total{outcome="resumed",topic="other"}`:                                0,
		`patchflow_records_total{outcome="fenced",topic="other"}`:                                 1,
	}
	for _, r := range inventory.SkipReasons() {
		for topic, ts := range snap.ByTopic {
			want[fmt.Sprintf("patchflow_records_skipped_total{reason=%q,topic=%q}", r, topic)] = float64(ts.SkippedByReason[string(r)])
		}
	}
	got := samples(t, c, "patchflow_records_total", "patchflow_records_skipped_total")
	if !maps.Equal(got, want) {
		t.Fatalf("samples\n%v\nwant\n%v", got, want)
	}
	if got[`patchflow_records_skipped_total{reason="reporter not allowed",topic="inventory"}`] != 3 {
		t.Fatal("the reporter filter's count is not exported")
	}
}

// Dead-lettered records are counted by reason, each of the bounded set
// present from the start (at 0); the reasons sum to the dead_lettered
// outcome, which stays as it was.
func TestDeadLetteredRecordsByReason(t *testing.T) {
	snap := actors.StatsSnapshot{ByTopic: map[string]actors.TopicStatsSnapshot{"inventory": {DeadLettered: 5,
		DeadLetteredByReason: map[string]int64{string(inventory.ReasonMissingHostID): 3, string(messages.ReasonTransient): 2}}}}
	c := &bridgeCollector{partitions: func() []actors.PartitionState { return nil }, stats: func() actors.StatsSnapshot { return snap },
		validationReasons: inventory.ValidationReasons()}
	got := samples(t, c, "patchflow_records_total", "patchflow_records_dead_lettered_total")
	want := map[string]float64{}
	for _, r := range append(messages.DeadLetterReasons(), inventory.ValidationReasons()...) {
		want[fmt.Sprintf("patchflow_records_dead_lettered_total{reason=%q,topic=\"inventory\"}", r)] = float64(snap.ByTopic["inventory"].DeadLetteredByReason[string(r)])
	}
	var sum float64
	for k, v := range got {
		if strings.HasPrefix(k, "patchflow_records_dead_lettered_total") {
			sum += v
			continue
		}
		want[k] = v // the outcomes, checked by TestSkippedRecordsByReason
	}
	if !maps.Equal(got, want) {
		t.Fatalf("samples\n%v\nwant\n%v", got, want)
	}
	if dl := got[`patchflow_records_total{outcome="dead_lettered",topic="inventory"}`]; dl != 5 || sum != dl {
		t.Fatalf("dead_lettered outcome %v, reasons sum to %v; want both 5", dl, sum)
	}
}

// nothing admitted (claimed at its end) has the committed one alone.
func TestNoPlaceholderOffsetSamples(t *testing.T) {
	parts := []actors.PartitionState{
		{Topic: "t", Partition: 0, Committed: -1, Admitted: -1, Start: sarama.OffsetOldest},
		{Topic: "t", Partition: 1, Committed: 42, Admitted: -1, Start: 42, HighWatermark: 42},
		{Topic: "t", Partition: 2, Committed: 7, Admitted: 9, Start: 5, HighWatermark: 10, InFlight: 1},
	}
	c := &bridgeCollector{partitions: func() []actors.PartitionState { return parts }, stats: func() actors.StatsSnapshot { return actors.StatsSnapshot{} }}
	got := samples(t, c, "patchflow_partition_committed_offset", "patchflow_partition_admitted_offset")
	want := map[string]float64{
		`patchflow_partition_committed_offset{partition="1",topic="t"}`: 42,
		`patchflow_partition_committed_offset{partition="2",topic="t"}`: 7,
		`patchflow_partition_admitted_offset{partition="2",topic="t"}`:  9,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("offset samples\n%v\nwant\n%v", got, want)
	}
}

// The handler's histogram is fine enough to read a quantile from to about a
// fifth, from 1 ms to 30 s: every bucket's upper bound at most 1.2 × the
// last one's.
func TestHandlerHistogramResolvesAFifth(t *testing.T) {
	m := New()
	m.HandlerDone("ok", 250*time.Millisecond)
	families, err := m.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var bounds []float64
	for _, f := range families {
		if f.GetName() == "patchflow_handler_duration_seconds" {
			for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
		}
	}
	if len(bounds) == 0 || bounds[0] > 0.001 || bounds[len(bounds)-1] < 30 {
		t.Fatalf("buckets %v: want them from 1 ms or less to 30 s or more", bounds)
	}
	for i := 1; i < len(bounds); i++ {
		if r := bounds[i] / bounds[i-1]; r > 1.2 {
			t.Errorf("bucket %g s is %.2f × the one below it (%g s): a quantile inside it is good only to that factor", bounds[i], r, bounds[i-1])
		}
	}
}

// patchflow_ready is the readiness's last verdict: 0 before any, 0 when it
// judged not ready (here: not joined to the group).
func TestReadyMetricIsTheLastVerdict(t *testing.T) {
	b := newIdleBridge(t)
	m, err := NewIn(prometheus.NewPedanticRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r := &Readiness{Bridge: b}
	detach, err := m.AttachReadiness(r)
	if err != nil {
		t.Fatal(err)
	}
	got := func() float64 {
		fams, err := m.Gatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "patchflow_ready" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	if v := got(); v != 0 {
		t.Fatalf("patchflow_ready before any verdict = %v, want 0", v)
	}
	r.ready = true // as a verdict of ready would leave it
	if v := got(); v != 1 {
		t.Fatalf("patchflow_ready after a ready verdict = %v, want 1", v)
	}
	if ok, _ := r.Check(time.Now()); ok {
		t.Fatal("an unjoined bridge judged ready")
	}
	if v := got(); v != 0 {
		t.Fatalf("patchflow_ready after a not-ready verdict = %v, want 0", v)
	}
	detach()
	if v := got(); v != -1 {
		t.Fatalf("patchflow_ready still served after detach: %v", v)
	}
}
