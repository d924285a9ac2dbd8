package listener_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/internal/telemetry"
	"github.com/patchflow/patchflow/internal/telemetry/statustest"
)

// statusJSON reads /status.json as plain JSON values.
func statusJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	code, body := get(t, url+"/status.json")
	var st map[string]any
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("/status.json %d: %v\n%s", code, err, body)
	}
	return st
}

// The status page and its JSON say what is so, once, in one naming style:
// readiness once; a partition with nothing committed shows none (no -1, no
// metric sample); the oldest unfinished record's column is named for an
// offset; panics are among the totals; S and G stand beside the records
// in flight, each partition's against S.
func TestStatusPageReadsRight(t *testing.T) {
	handler := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		if string(r.Value) == "panic" {
			panic("a handler bug, in a test")
		}
		return nil
	})
	cfg, bridge, metrics := startEmbeddedListener(t, map[string]string{"LISTENER_INFLIGHT_PER_PARTITION": "4", "LISTENER_MAX_ATTEMPTS": "1"}, handler)
	srv := httptest.NewServer(telemetry.Handler(metrics, &telemetry.Readiness{Bridge: bridge}, nil))
	defer srv.Close()
	eventually(t, "ready with the partition claimed", func() bool {
		code, _ := get(t, srv.URL+"/readyz")
		return code == 200 && len(bridge.Partitions()) == 1
	})
	g := cfg.Pipeline.InFlightTotal

	// Nothing committed yet: none, not -1.
	st := statusJSON(t, srv.URL)
	if bad := statustest.NonSnakeKeys(st); len(bad) > 0 {
		t.Errorf("/status.json keys not in snake_case: %v", bad)
	}
	parts, _ := st["partitions"].([]any)
	if len(parts) != 1 {
		t.Fatalf("partitions %v", st["partitions"])
	}
	p, _ := parts[0].(map[string]any)
	if _, ok := p["committed"]; ok {
		t.Errorf("a partition the group never committed shows committed %v", p["committed"])
	}
	if _, ok := p["admitted"]; ok {
		t.Errorf("a partition with nothing admitted shows admitted %v", p["admitted"])
	}
	if p["in_flight_limit"] != 4.0 {
		t.Errorf("in_flight_limit %v, want S = 4", p["in_flight_limit"])
	}
	c, _ := st["concurrency"].(map[string]any)
	if c["per_partition_limit"] != 4.0 || c["ceiling"] != float64(g) {
		t.Errorf("concurrency %v: want per_partition_limit 4 (S) and ceiling %d (G)", c, g)
	}
	if _, ok := st["why"]; ok {
		t.Errorf("ready, yet why %q", st["why"])
	}
	if _, body := get(t, srv.URL+"/metrics"); strings.Contains(body, "patchflow_partition_committed_offset{") || strings.Contains(body, "patchflow_partition_admitted_offset{") {
		t.Errorf("/metrics has an offset sample of a partition with none")
	}
	_, page := get(t, srv.URL+"/status")
	for _, want := range []string{`<td>none</td><td>none</td>`, `<td>0 / 4</td>`, `<th>oldest unfinished offset</th>`, `at most S 4 per partition`,
		fmt.Sprintf("ceiling G %d", g), "panics 0"} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %s", want)
		}
	}
	if n := strings.Count(page, "ready"); n != 1 || strings.Contains(page, "oldest in flight") {
		t.Errorf("status page: %q %d times (want once), or a column named oldest in flight", "ready", n)
	}

	// A panicking handler is counted among the totals. The panic is the
	// record's own once other records are handled just after it.
	produceValues(t, cfg, "panic")
	eventually(t, "the panic", func() bool {
		totals, _ := statusJSON(t, srv.URL)["totals"].(map[string]any)
		return totals["panics"] == 1.0
	})
	produceValues(t, cfg, "fine", "fine", "fine", "fine") // host-0's waits behind the panic: three others
	committed := fmt.Sprintf(`patchflow_partition_committed_offset{partition="0",topic=%q}`, cfg.Kafka.Topic)
	eventually(t, "every record committed", func() bool { return scrape(t, srv.URL, committed) == 5 })
	st = statusJSON(t, srv.URL)
	// It panics at every attempt (it retries at its backoff while the
	// verdicts on its panics ripen) until one is judged its own.
	totals, _ := st["totals"].(map[string]any)
	panics, _ := totals["panics"].(float64)
	if panics < 1 || totals["dead_lettered"] != 1.0 || totals["retried_own"] != 1.0 {
		t.Errorf("totals %v: want panics, one judged its own, 1 dead-lettered", st["totals"])
	}
	if p := st["partitions"].([]any)[0].(map[string]any); p["committed"] != 5.0 || p["admitted"] != 4.0 {
		t.Errorf("partition %v: want committed 5, admitted 4", p)
	}
	if bad := statustest.NonSnakeKeys(st); len(bad) > 0 {
		t.Errorf("/status.json keys not in snake_case: %v", bad)
	}
	if _, page := get(t, srv.URL+"/status"); !strings.Contains(page, fmt.Sprintf("panics %d ", int(panics))) {
		t.Errorf("status page lacks panics %d", int(panics))
	}
	if t.Failed() {
		t.Logf("status page:\n%s", page)
	}
}
