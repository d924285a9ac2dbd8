package telemetry

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Every metric the Grafana dashboard queries exists.
func TestDashboardQueriesExistingMetrics(t *testing.T) {
	m := New()
	m.HandlerDone("ok", time.Millisecond)
	m.DrainDone(time.Millisecond, false)
	m.ClaimStarted("t", 0)
	m.Dependency("vmaas", time.Millisecond, nil)
	m.Dependency("database", time.Millisecond, nil)
	known := map[string]bool{}
	families, err := m.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		known[f.GetName()] = true
	}
	descs := make(chan *prometheus.Desc, 32)
	(&bridgeCollector{}).Describe(descs)
	close(descs)
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range descs {
		if mm := fq.FindStringSubmatch(d.String()); mm != nil {
			known[mm[1]] = true
		}
	}

	raw, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`patchflow_[a-z_]+`)
	n := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			for _, name := range used.FindAllString(target.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
				if !known[base] {
					t.Errorf("panel %q queries %s, which the listener does not export", p.Title, name)
				}
				n++
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d metric references found in the dashboard", n)
	}
}
