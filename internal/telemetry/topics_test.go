package telemetry

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchflow/patchflow/actors"
)

// The group's lag per topic is served as read; before the first good read
// only its age, which grows while reads fail; detach takes it away.
func TestTopicLagIsServedAsRead(t *testing.T) {
	m, err := NewIn(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var lags []actors.TopicLag
	var at time.Time
	detach, err := m.AttachTopicLag(func() ([]actors.TopicLag, time.Time) { return lags, at })
	if err != nil {
		t.Fatal(err)
	}
	read := func() map[string]float64 {
		out := map[string]float64{}
		families, err := m.Gatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, s := range f.GetMetric() {
				if strings.HasPrefix(f.GetName(), "patchflow_topic") {
					key := f.GetName()
					for _, l := range s.GetLabel() {
						key += "/" + l.GetValue()
					}
					out[key] = s.GetGauge().GetValue()
				}
			}
		}
		return out
	}
	if got := read(); len(got) != 0 {
		t.Fatalf("before the reading began: %v", got)
	}
	// Reading, and no read good yet: only the age, growing from the start.
	at = time.Now().Add(-3 * time.Second)
	if got := read(); len(got) != 1 || got["patchflow_topic_lag_read_age_seconds"] < 3 {
		t.Fatalf("while every read has failed: %v; want the age alone, at least 3 s", got)
	}
	lags, at = []actors.TopicLag{{Topic: "a", Partitions: 8, Unclaimed: 4, Lag: 120, UnclaimedLag: 100}, {Topic: "b", Partitions: 2}}, time.Now()
	got := read()
	delete(got, "patchflow_topic_lag_read_age_seconds")
	want := map[string]float64{
		"patchflow_topic_partitions/a": 8, "patchflow_topic_unclaimed_partitions/a": 4, "patchflow_topic_lag_records/a": 120, "patchflow_topic_unclaimed_lag_records/a": 100,
		"patchflow_topic_partitions/b": 2, "patchflow_topic_unclaimed_partitions/b": 0, "patchflow_topic_lag_records/b": 0, "patchflow_topic_unclaimed_lag_records/b": 0,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if st := m.topicStatus(); len(st) != 2 || st[0].Topic != "a" || st[0].Unclaimed != 4 {
		t.Fatalf("/status topics %+v", st)
	}
	detach()
	if got := read(); len(got) != 0 {
		t.Fatalf("after detach: %v", got)
	}
}
