package prometheus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	promlabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/internal/telemetry"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/embedded"
)

// promtool runs the pinned promtool (the tool directive in go.mod), built
// without Prometheus's service discovery plugins (the remove_all_sd tag):
// checking and testing rules needs none of them, and a cold build takes
// 1 min 55 s instead of 4 min 31 s (two cores), most of CI's deploy step.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "promtool"}, args...)...)
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -tags=remove_all_sd"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestRulesAreValid(t *testing.T) { promtool(t, "check", "rules", "alerts.yaml") }

// Every rule fires where it must and stays quiet in a close case where it
// must not (alerts_test.yaml).
func TestRulesPassTheirUnitTests(t *testing.T) { promtool(t, "test", "rules", "alerts_test.yaml") }

// The PrometheusRule decodes strictly into the operator's type and holds
// exactly alerts.yaml's groups.
func TestThePrometheusRuleHoldsTheSameGroups(t *testing.T) {
	b, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pr monitoringv1.PrometheusRule
	if err := yaml.UnmarshalStrict(b, &pr); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if pr.Kind != "PrometheusRule" || pr.APIVersion != "monitoring.coreos.com/v1" {
		t.Fatalf("prometheusrule.yaml is a %s %s", pr.APIVersion, pr.Kind)
	}
	var file struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	a, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(a, &file); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	got, _ := yaml.Marshal(pr.Spec.Groups)
	want, _ := yaml.Marshal(file.Groups)
	if string(got) != string(want) {
		t.Fatalf("prometheusrule.yaml's groups differ from alerts.yaml's:\n--- prometheusrule.yaml\n%s\n--- alerts.yaml\n%s", got, want)
	}
}

// scrapeLabels are what Prometheus adds to every scraped series.
var scrapeLabels = []string{"job", "instance"}

// used returns every metric name the rules' expressions and the unit tests'
// series use, each with the label names used with it.
func used(t *testing.T) map[string][]string {
	t.Helper()
	a, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var groups struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string } `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(a, &groups); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	p := parser.NewParser(parser.Options{})
	out := map[string][]string{}
	add := func(name string, labels ...string) {
		for _, l := range labels {
			if l != model.MetricNameLabel && !slices.Contains(out[name], l) {
				out[name] = append(out[name], l)
			}
		}
		if _, ok := out[name]; !ok {
			out[name] = nil
		}
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				// Labels a by (...) groups on are checked through the test
				// series, which carry them.
				if n, ok := n.(*parser.VectorSelector); ok {
					var labels []string
					for _, m := range n.LabelMatchers {
						labels = append(labels, m.Name)
					}
					add(n.Name, labels...)
				}
				return nil
			})
		}
	}
	b, err := os.ReadFile("alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			InputSeries []struct {
				Series string `json:"series"`
			} `json:"input_series"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests.Tests {
		for _, s := range tc.InputSeries {
			m, err := p.ParseMetric(s.Series)
			if err != nil {
				t.Fatalf("series %q: %v", s.Series, err)
			}
			var labels []string
			m.Range(func(l promlabels.Label) { labels = append(labels, l.Name) })
			add(m.Get(model.MetricNameLabel), labels...)
		}
	}
	return out
}

// served starts a listener's pipeline on the in-process broker with its
// HTTP endpoints, brings every family of series the rules read into being
// (a claimed partition, a record in flight, one dead-lettered) and returns
// each metric /metrics serves with its label names.
func served(t *testing.T) map[string][]string {
	t.Helper()
	const topic = "alerts"
	broker, err := embedded.Start(1, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	release := make(chan struct{})
	handler := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		switch string(r.Value) {
		case "hold":
			select {
			case <-release:
			case <-ctx.Done():
			}
		case "bad":
			return consumer.Permanent(errors.New("a broken record"))
		}
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: topic, Group: "alerts", SessionTimeout: 6 * time.Second, HeartbeatInterval: time.Second},
		handler, consumer.WithHTTP(addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { close(release); cancel(); <-done }()
	if err := broker.Produce(topic, "a", "fine", "b", "bad", "c", "hold"); err != nil {
		t.Fatal(err)
	}
	want := []string{"patchflow_partition_oldest_in_flight_age_seconds", "patchflow_records_dead_lettered_total", "patchflow_ready"}
	// Wait until the in-flight record, the dead letter and readiness show;
	// after 30 s compare what shows then, so a renamed metric is named.
	deadline := time.Now().Add(30 * time.Second)
	var out map[string][]string
	for {
		families, err := scrape("http://" + addr + "/metrics")
		if err == nil {
			out = map[string][]string{}
			for name, f := range families {
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						if !slices.Contains(out[name], l.GetName()) {
							out[name] = append(out[name], l.GetName())
						}
					}
				}
				if _, ok := out[name]; !ok {
					out[name] = nil
				}
			}
			ready := families["patchflow_ready"]
			if c.Stats().DeadLettered == 1 && ready != nil && ready.GetMetric()[0].GetGauge().GetValue() == 1 && hasAll(out, want) {
				return out
			}
		}
		if time.Now().After(deadline) {
			if out == nil {
				t.Fatalf("no /metrics within 30 s: %v", err)
			}
			t.Logf("after 30 s /metrics still lacks a record in flight, a dead letter or readiness; comparing what it serves")
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func hasAll(m map[string][]string, names []string) bool {
	for _, n := range names {
		if _, ok := m[n]; !ok {
			return false
		}
	}
	return true
}

func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("%s: %d %s", url, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// missing names what the rules use that the served metrics lack.
func missing(usedBy, served map[string][]string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(usedBy)) {
		labels, ok := served[name]
		if !ok {
			out = append(out, name)
			continue
		}
		for _, l := range usedBy[name] {
			if !slices.Contains(labels, l) && !slices.Contains(scrapeLabels, l) {
				out = append(out, name+"{"+l+"}")
			}
		}
	}
	return out
}

// Every metric and label the rules and their tests use is one a live
// listener serves: a renamed metric or label fails here, not in production
// as an alert that never fires.
// relayServes returns each metric the listener's outbox relay adds to
// /metrics (beside the consumer's), read from a running relay attached to
// the listener's metrics, with its label names.
func relayServes(t *testing.T) map[string][]string {
	t.Helper()
	system := actors.NewActorSystem(slog.New(slog.DiscardHandler))
	defer system.Shutdown()
	r, err := actors.StartRelay(system, actors.RelayConfig{Store: emptyOutbox{}, Publisher: noPublisher{}, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background()) //nolint:errcheck // nothing to publish
	m := telemetry.New()
	if err := m.AttachRelay(func() *actors.Relay { return r }); err != nil {
		t.Fatal(err)
	}
	families, err := m.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "patchflow_outbox_") {
			continue
		}
		out[f.GetName()] = nil
		for _, x := range f.GetMetric() {
			for _, l := range x.GetLabel() {
				out[f.GetName()] = append(out[f.GetName()], l.GetName())
			}
		}
	}
	return out
}

type emptyOutbox struct{}

func (emptyOutbox) Claim(context.Context, int, []messages.OutboxKind) ([]messages.OutboxMessage, func(context.Context, messages.OutboxOutcome) error, error) {
	return nil, func(context.Context, messages.OutboxOutcome) error { return nil }, nil
}

func (emptyOutbox) Backlog(context.Context) (messages.OutboxBacklog, error) {
	return messages.OutboxBacklog{}, nil
}

type noPublisher struct{}

func (noPublisher) Publish(m []messages.OutboxMessage) []error { return make([]error, len(m)) }

func TestRulesReadWhatTheListenerServes(t *testing.T) {
	usedBy, live := used(t), served(t)
	relay := relayServes(t)
	if len(relay) == 0 {
		t.Fatal("the relay served no patchflow_outbox_ metric")
	}
	maps.Copy(live, relay)
	if m := missing(usedBy, live); len(m) > 0 {
		t.Fatalf("the rules use metrics or labels /metrics does not serve: %v", m)
	}
	// The check can fail: a renamed metric and a misspelt label are found.
	renamed := maps.Clone(usedBy)
	renamed["patchflow_partition_lag"] = nil
	typo := maps.Clone(usedBy)
	typo["patchflow_records_total"] = append(slices.Clone(typo["patchflow_records_total"]), "outcomes")
	for name, u := range map[string]map[string][]string{"renamed": renamed, "typo": typo} {
		if m := missing(u, live); len(m) != 1 {
			t.Errorf("%s: found %v, want exactly the one mutation", name, m)
		}
	}
	if !regexp.MustCompile(`^patchflow_`).MatchString(slices.Sorted(maps.Keys(usedBy))[0]) {
		t.Errorf("the rules use %v", slices.Sorted(maps.Keys(usedBy)))
	}
}
