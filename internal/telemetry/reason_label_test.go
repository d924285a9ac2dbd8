package telemetry

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// A reason that is not valid UTF-8 must not cost /metrics: the Prometheus
// client refuses such a label value when it gathers, so a single skipped or
// dead-lettered record with one made every scrape of the process answer 500
// for as long as it ran. The bridge's counters are served as they were
// counted, so the collector's own snapshot carries the bad reasons here.
func TestMetricsServeReasonsThatAreNotUTF8(t *testing.T) {
	snap := actors.StatsSnapshot{ByTopic: map[string]actors.TopicStatsSnapshot{"t": {Skipped: 1, DeadLettered: 1,
		SkippedByReason:      map[string]int64{"bad \xff reason": 1},
		DeadLetteredByReason: map[string]int64{"\xfe\xfe": 1}}}}
	m, err := NewIn(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c := &bridgeCollector{partitions: func() []actors.PartitionState { return nil }, stats: func() actors.StatsSnapshot { return snap }}
	if err := m.Registry.Register(c); err != nil { // what AttachBridge registers
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(m, &Readiness{Bridge: newIdleBridge(t)}, nil))
	defer srv.Close()
	code, body := get(t, srv.URL+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d: %.300s", code, body)
	}
	for _, want := range []string{"patchflow_records_skipped_total{reason=\"bad \ufffd reason\",topic=\"t\"} 1", "patchflow_records_dead_lettered_total{reason=\"\ufffd\",topic=\"t\"} 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Any bytes a handler gives as a skip reason or a dead-letter (validation)
// reason, taken the way the pipeline takes them (messages.SkipReasonOf,
// ValidationReasonOf, DeadLetterReason) or handed to the collector raw,
// leave the registry gathering without error, every reason label valid
// UTF-8 of at most messages.MaxReasonBytes, and the counts whole: the
// labels of each family sum to its records. Seeds only under go test;
// go test -fuzz FuzzReasonLabels ./internal/telemetry explores.
func FuzzReasonLabels(f *testing.F) {
	for _, seed := range []string{"", "reporter not allowed", "bad \xff reason", "line\nbreak\x00", "abc\u202edcba",
		strings.Repeat("é", 40), strings.Repeat("x", messages.MaxReasonBytes+1)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		skip, ok := messages.SkipReasonOf(messages.Skip(messages.Reason(raw), "detail"))
		if !ok {
			t.Fatal("a skip did not read as one")
		}
		validation, ok := messages.ValidationReasonOf(messages.Invalid(messages.Reason(raw), "detail"))
		if !ok {
			t.Fatal("a validation error did not read as one")
		}
		dead := messages.DeadLetterReason(messages.ErrorClass_ERROR_CLASS_PERMANENT, validation)
		snap := actors.StatsSnapshot{ByTopic: map[string]actors.TopicStatsSnapshot{"t": {Skipped: 3, DeadLettered: 3,
			// the pipeline's keys, and the same bytes raw beside them: a
			// counter given a reason that is not clean
			SkippedByReason:      map[string]int64{string(skip): 1, raw + "\x00": 2},
			DeadLetteredByReason: map[string]int64{string(dead): 1, raw + "\x00": 2}}}}
		c := &bridgeCollector{partitions: func() []actors.PartitionState { return nil }, stats: func() actors.StatsSnapshot { return snap },
			skipReasons: []messages.Reason{messages.Reason(raw)}, validationReasons: []messages.Reason{messages.Reason(raw)}}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		families, err := reg.Gather()
		if err != nil {
			t.Fatalf("gather with reason %q: %v", raw, err)
		}
		sums := map[string]float64{}
		for _, fam := range families {
			for _, m := range fam.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() != "reason" {
						continue
					}
					if v := l.GetValue(); !utf8.ValidString(v) || len(v) > messages.MaxReasonBytes || v != string(messages.Reason(v).Clean()) {
						t.Fatalf("%s{reason=%q} from %q: not a clean label value", fam.GetName(), v, raw)
					}
					sums[fam.GetName()] += m.GetCounter().GetValue()
				}
			}
		}
		if sums["patchflow_records_skipped_total"] != 3 || sums["patchflow_records_dead_lettered_total"] != 3 {
			t.Fatalf("reason %q: the labels sum to %v, want 3 of each", raw, sums)
		}
	})
}
