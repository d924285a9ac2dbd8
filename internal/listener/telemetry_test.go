package listener_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/internal/telemetry"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// scrape returns the sum of the samples of the exposition that sample
// names: its family, with at least its labels (a family counted per topic
// is summed over the topics the query leaves out), or -1 when none is.
func scrape(t *testing.T, url, sample string) float64 {
	t.Helper()
	name, want := parseSample(t, sample)
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := families[name]
	part := ""
	if !ok { // a histogram's _count or _sum is a field of its family
		for _, suffix := range []string{"_count", "_sum"} {
			if base, cut := strings.CutSuffix(name, suffix); cut && families[base] != nil {
				f, ok, part = families[base], true, suffix
			}
		}
	}
	if !ok {
		return -1
	}
	sum, found := 0.0, false
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && have[k] == v
		}
		if !match {
			continue
		}
		found = true
		switch {
		case part == "_count":
			sum += float64(m.GetHistogram().GetSampleCount())
		case part == "_sum":
			sum += m.GetHistogram().GetSampleSum()
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		default:
			sum += m.GetUntyped().GetValue()
		}
	}
	if !found {
		return -1
	}
	return sum
}

var sampleLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)=("(?:[^"\\]|\\.)*")`)

// parseSample splits a sample as the exposition writes it, name{k="v",...}.
func parseSample(t *testing.T, sample string) (string, map[string]string) {
	t.Helper()
	name, labels, ok := strings.Cut(sample, "{")
	want := map[string]string{}
	if !ok {
		return name, want
	}
	for _, m := range sampleLabel.FindAllStringSubmatch(strings.TrimSuffix(labels, "}"), -1) {
		v, err := strconv.Unquote(m[2])
		if err != nil {
			t.Fatalf("sample %s: %v", sample, err)
		}
		want[m[1]] = v
	}
	return name, want
}

// scrapePrefix returns the value of the first sample whose line starts with
// prefix (a family with labels not known in advance), or -1.
func scrapePrefix(t *testing.T, url, prefix string) float64 {
	t.Helper()
	_, body := get(t, url+"/metrics")
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return -1
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// lockedBuffer collects log lines written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startEmbeddedListener runs the listener with handler on an in-process
// broker of one partition, configured by env on top of the defaults, until
// the test ends; it returns the configuration, the bridge and the metrics.
func startEmbeddedListener(t *testing.T, env map[string]string, handler consumer.Handler) (*listener.Config, *actors.Bridge, *telemetry.Metrics) {
	t.Helper()
	all := map[string]string{"KAFKA_BROKERS": "embedded", "EMBEDDED_PARTITIONS": "1", "LISTENER_HTTP_ADDR": "", "LISTENER_PROGRESS_INTERVAL": "0"}
	maps.Copy(all, env)
	cfg, _, err := parse(nil, lookup(all))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := embedded.Start(1, cfg.Kafka.Topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cfg.Brokers, cfg.Kafka.Brokers = cluster.Addrs(), cluster.Addrs()
	metrics := telemetry.New()
	metrics.KnowReasons(inventory.SkipReasons(), inventory.ValidationReasons())
	bridges := make(chan *actors.Bridge, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- listener.RunWith(ctx, cfg, handler, slog.New(slog.DiscardHandler),
			listener.Hooks{Metrics: metrics, Started: func(b *actors.Bridge) { bridges <- b }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return cfg, <-bridges, metrics
}

// produceValues writes values to the listener's topic, the i-th keyed host-i.
func produceValues(t *testing.T, cfg *listener.Config, values ...string) {
	t.Helper()
	pcfg := sarama.NewConfig()
	pcfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(cfg.Brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i, v := range values {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: cfg.Kafka.Topic, Key: sarama.StringEncoder(fmt.Sprint("host-", i)), Value: sarama.StringEncoder(v)}); err != nil {
			t.Fatal(err)
		}
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Metrics move as records flow; readiness goes false while a stuck record
// pins a watermark past the limit, and true again once it finishes.
func TestMetricsAndReadinessFollowThePipeline(t *testing.T) {

	release := make(chan struct{})
	handler := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		if string(r.Value) == "stuck" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	cfg, bridge, metrics := startEmbeddedListener(t, nil, handler)
	var logs lockedBuffer
	readiness := &telemetry.Readiness{Bridge: bridge, PinLimit: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	srv := httptest.NewServer(telemetry.Handler(metrics, readiness,
		[]telemetry.Setting{{Name: "DATABASE_URL", Value: "postgres://patch:xxxxx@db/patch"}}))
	defer srv.Close()

	if code, _ := get(t, srv.URL+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	eventually(t, "joining the group", func() bool { code, _ := get(t, srv.URL+"/readyz"); return code == 200 })
	if got := logs.String(); strings.Count(got, "readiness") != 1 || !strings.Contains(got, `msg="readiness: ready"`) {
		t.Fatalf("once joined, the log should say ready once:\n%s", got)
	}
	// The consumer's own readiness (its watch judges every second) is on
	// /metrics, as is the build.
	eventually(t, "patchflow_ready 1", func() bool { return scrape(t, srv.URL, "patchflow_ready") == 1 })
	if v := scrapePrefix(t, srv.URL, "patchflow_build_info{"); v != 1 {
		t.Fatalf("patchflow_build_info = %v, want 1", v)
	}
	// Counted per topic, the topic present from the start.
	okSample := fmt.Sprintf(`patchflow_records_total{outcome="ok",topic=%q}`, cfg.Kafka.Topic)
	if v := scrape(t, srv.URL, okSample); v != 0 {
		t.Fatalf("before any record: %s = %v", okSample, v)
	}

	produce := func(values ...string) { produceValues(t, cfg, values...) }
	values := make([]string, 20)
	for i := range values {
		values[i] = "fine"
	}
	produce(values...)
	committed := fmt.Sprintf(`patchflow_partition_committed_offset{partition="0",topic=%q}`, cfg.Kafka.Topic)
	eventually(t, "20 records counted and committed", func() bool {
		return scrape(t, srv.URL, okSample) == 20 && scrape(t, srv.URL, committed) == 20
	})

	produce("stuck", "fine")
	pinned := fmt.Sprintf(`patchflow_partition_pinned_offset{partition="0",topic=%q}`, cfg.Kafka.Topic)
	eventually(t, "the stuck record to pin the watermark", func() bool { return scrape(t, srv.URL, pinned) == 20 })
	eventually(t, "readiness to go false", func() bool {
		code, body := get(t, srv.URL+"/readyz")
		return code == 503 && strings.Contains(body, "pinned")
	})
	age := fmt.Sprintf(`patchflow_partition_oldest_in_flight_age_seconds{partition="0",topic=%q}`, cfg.Kafka.Topic)
	if v := scrape(t, srv.URL, age); v < 0.3 {
		t.Fatalf("oldest in-flight age %v while pinned past the limit", v)
	}
	// the status page's JSON twin shows the pinned record, the HTML its row
	var st telemetry.Status
	resp, err := http.Get(srv.URL + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Ready || len(st.Partitions) != 1 || st.Partitions[0].PinnedOffset == nil || *st.Partitions[0].PinnedOffset != 20 ||
		st.Partitions[0].Committed == nil || *st.Partitions[0].Committed != 20 || st.Partitions[0].InFlight != 1 || st.Partitions[0].PinnedKey != "host-0" {
		t.Fatalf("status.json %+v (%v)", st, err)
	}
	if code, body := get(t, srv.URL+"/status"); code != 200 || !strings.Contains(body, `<tr class="partition">`) || !strings.Contains(body, "not ready") ||
		!strings.Contains(body, "xxxxx") || !strings.Contains(body, `<p id="concurrency">Concurrency: <b>adaptive</b> (gradient)`) {
		t.Fatalf("status page %d:\n%s", code, body)
	}
	// The adaptive limit is on the status page's JSON and on /metrics.
	if c := st.Concurrency; c.Mode != "adaptive" || c.Limit < c.Floor || c.Limit > c.Ceiling || c.Ceiling != cfg.Pipeline.InFlightTotal {
		t.Fatalf("status.json concurrency %+v, want adaptive within [floor, G=%d]", c, cfg.Pipeline.InFlightTotal)
	}
	if v := scrape(t, srv.URL, `patchflow_concurrency_limit{mode="adaptive"}`); v < 1 || v > float64(cfg.Pipeline.InFlightTotal) {
		t.Fatalf("patchflow_concurrency_limit %v, want within [1, G]", v)
	}
	if f, c := scrape(t, srv.URL, "patchflow_concurrency_floor"), scrape(t, srv.URL, "patchflow_concurrency_ceiling"); f != float64(st.Concurrency.Floor) || c != float64(cfg.Pipeline.InFlightTotal) {
		t.Fatalf("patchflow_concurrency_floor %v and _ceiling %v, want %d and %d", f, c, st.Concurrency.Floor, cfg.Pipeline.InFlightTotal)
	}
	close(release)
	eventually(t, "readiness to come back", func() bool { code, _ := get(t, srv.URL+"/readyz"); return code == 200 })
	// Each change is logged once, with its reason, however many probes saw it.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], `level=WARN msg="readiness: not ready" reason=`) || !strings.Contains(lines[1], "watermark pinned") ||
		!strings.Contains(lines[2], `msg="readiness: ready"`) {
		t.Fatalf("readiness log: want ready, not ready (pinned), ready:\n%s", logs.String())
	}
	eventually(t, "22 records committed", func() bool { return scrape(t, srv.URL, committed) == 22 })
	if v := scrape(t, srv.URL, `patchflow_handler_duration_seconds_count{outcome="ok"}`); v != 22 {
		t.Fatalf("handler duration count %v, want 22", v)
	}
}

// Invariant 8 through the whole pipeline: records the handler skips are
// committed, counted by reason on /metrics and the status page, and never
// dead-lettered; a broken one still is.
func TestSkippedRecordsAreCommittedCountedNotDeadLettered(t *testing.T) {

	handler := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		v := string(r.Value)
		if reason, ok := strings.CutPrefix(v, "skip:"); ok {
			return fmt.Errorf("host %s: %w", r.Key, messages.Skip(messages.Reason(reason), "in a test"))
		}
		if v == "broken" {
			return messages.Permanent(errors.New("broken in a test"))
		}
		return nil
	})
	cfg, bridge, metrics := startEmbeddedListener(t, nil, handler)
	srv := httptest.NewServer(telemetry.Handler(metrics, &telemetry.Readiness{Bridge: bridge}, nil))
	defer srv.Close()

	values := []string{"skip:reporter not allowed", "fine", "skip:older than applied", "skip:reporter not allowed", "broken",
		"fine", "skip:reporter not allowed", "skip:older than applied", "fine", "fine"}
	produceValues(t, cfg, values...)
	committed := fmt.Sprintf(`patchflow_partition_committed_offset{partition="0",topic=%q}`, cfg.Kafka.Topic)
	eventually(t, "every record committed", func() bool { return scrape(t, srv.URL, committed) == float64(len(values)) })

	for sample, want := range map[string]float64{
		`patchflow_records_total{outcome="ok"}`:                           4,
		`patchflow_records_total{outcome="skipped"}`:                      5,
		`patchflow_records_total{outcome="dead_lettered"}`:                1,
		`patchflow_records_total{outcome="abandoned"}`:                    0,
		`patchflow_records_skipped_total{reason="reporter not allowed"}`:  3,
		`patchflow_records_skipped_total{reason="older than applied"}`:    2,
		`patchflow_records_skipped_total{reason="host recently deleted"}`: 0,
		`patchflow_handler_duration_seconds_count{outcome="ok"}`:          4,
		`patchflow_handler_duration_seconds_count{outcome="skipped"}`:     5,
		`patchflow_handler_duration_seconds_count{outcome="permanent"}`:   1,
	} {
		if got := scrape(t, srv.URL, sample); got != want {
			t.Errorf("%s = %v, want %v", sample, got, want)
		}
	}
	dlq, err := offsets.Read(cfg.Brokers, cfg.Kafka.DLQTopic, "")
	if err != nil {
		t.Fatal(err)
	}
	if n := dlq.Total(); n != 1 {
		t.Fatalf("%d dead letters, want only the broken record's", n)
	}

	var st telemetry.Status
	resp, err := http.Get(srv.URL + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	wantByReason := map[string]int64{"reporter not allowed": 3, "older than applied": 2}
	if err != nil || st.Totals.Skipped != 5 || !maps.Equal(st.Totals.SkippedByReason, wantByReason) {
		t.Fatalf("status.json totals %+v (%v), want 5 skipped: %v", st.Totals, err, wantByReason)
	}
	code, body := get(t, srv.URL+"/status")
	if code != 200 || !strings.Contains(body, "skipped 5") ||
		!strings.Contains(body, `<tr class="skip"><td class="l">reporter not allowed</td><td>3</td></tr>`) ||
		!strings.Contains(body, `<tr class="skip"><td class="l">older than applied</td><td>2</td></tr>`) {
		t.Fatalf("status page %d lacks the skipped totals:\n%s", code, body)
	}
}

// Dead letters are counted by reason through the whole pipeline: a broken
// message's validation reason, however the handler wrapped it, or the class
// of the failure; every reason is on /metrics from the start, the reasons
// sum to the dead_lettered outcome, and /status keeps its total beside the
// split.
func TestDeadLettersCountedByReason(t *testing.T) {
	handler := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		switch v := string(r.Value); v {
		case "not json":
			return fmt.Errorf("decode event: %w", messages.Permanent(&messages.ValidationError{Reason: inventory.ReasonMalformedJSON, Detail: "invalid character"}))
		case "unknown host":
			return messages.Permanent(errors.New("host not found in inventory"))
		}
		return nil
	})
	cfg, bridge, metrics := startEmbeddedListener(t, nil, handler)
	srv := httptest.NewServer(telemetry.Handler(metrics, &telemetry.Readiness{Bridge: bridge}, nil))
	defer srv.Close()
	if got := scrape(t, srv.URL, `patchflow_records_dead_lettered_total{reason="missing org id"}`); got != 0 {
		t.Fatalf("missing org id before any record: %v, want 0", got)
	}

	produceValues(t, cfg, "fine", "not json", "unknown host", "fine", "not json")
	committed := fmt.Sprintf(`patchflow_partition_committed_offset{partition="0",topic=%q}`, cfg.Kafka.Topic)
	eventually(t, "every record committed", func() bool { return scrape(t, srv.URL, committed) == 5 })

	want := map[string]float64{`patchflow_records_total{outcome="dead_lettered"}`: 3}
	for _, r := range append(messages.DeadLetterReasons(), inventory.ValidationReasons()...) {
		want[fmt.Sprintf("patchflow_records_dead_lettered_total{reason=%q}", r)] = 0
	}
	want[`patchflow_records_dead_lettered_total{reason="malformed JSON"}`] = 2
	want[`patchflow_records_dead_lettered_total{reason="permanent"}`] = 1
	for sample, v := range want {
		if got := scrape(t, srv.URL, sample); got != v {
			t.Errorf("%s = %v, want %v", sample, got, v)
		}
	}

	var st telemetry.Status
	resp, err := http.Get(srv.URL + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	wantByReason := map[string]int64{}
	for _, r := range append(messages.DeadLetterReasons(), inventory.ValidationReasons()...) {
		wantByReason[string(r)] = 0 // every reason, from the start
	}
	wantByReason["malformed JSON"], wantByReason["permanent"] = 2, 1
	if err != nil || st.Totals.DeadLettered != 3 || !maps.Equal(st.Totals.DeadLetteredByReason, wantByReason) {
		t.Fatalf("status.json totals %+v (%v), want 3 dead-lettered: %v", st.Totals, err, wantByReason)
	}
	code, body := get(t, srv.URL+"/status")
	if code != 200 || !strings.Contains(body, "dead-lettered 3") ||
		!strings.Contains(body, `<tr class="dead-letter"><td class="l">malformed JSON</td><td>2</td></tr>`) ||
		!strings.Contains(body, `<tr class="dead-letter"><td class="l">permanent</td><td>1</td></tr>`) {
		t.Fatalf("status page %d lacks the dead-lettered totals:\n%s", code, body)
	}
}

// A dead-letter write that cannot succeed (the topic was deleted under the
// listener) keeps its record unfinished and the partition's commits behind
// it; /readyz, /status and a metric say so with the reason; once the topic
// exists again the record is dead-lettered and committed, and readiness
// comes back.
func TestDeadLetterTopicGoneBlocksThePartitionVisibly(t *testing.T) {
	env := map[string]string{"LISTENER_BACKOFF_MIN": "10ms", "LISTENER_BACKOFF_MAX": "100ms"}
	handler := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		if string(r.Value) == "broken" {
			return messages.Permanent(errors.New("broken in a test"))
		}
		return nil
	})
	cfg, bridge, metrics := startEmbeddedListener(t, env, handler)
	srv := httptest.NewServer(telemetry.Handler(metrics, &telemetry.Readiness{Bridge: bridge}, nil))
	defer srv.Close()
	eventually(t, "joining the group", func() bool { code, _ := get(t, srv.URL+"/readyz"); return code == 200 })

	acfg := sarama.NewConfig()
	acfg.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(cfg.Brokers, acfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteTopic(cfg.Kafka.DLQTopic); err != nil {
		t.Fatal(err)
	}
	produceValues(t, cfg, "fine", "broken", "fine")
	blocked := fmt.Sprintf(`patchflow_partition_dead_letter_blocked{partition="0",topic=%q}`, cfg.Kafka.Topic)
	committed := fmt.Sprintf(`patchflow_partition_committed_offset{partition="0",topic=%q}`, cfg.Kafka.Topic)
	eventually(t, "the partition to report its dead letters blocked", func() bool { return scrape(t, srv.URL, blocked) == 1 })
	code, body := get(t, srv.URL+"/readyz")
	if code != 503 || !strings.Contains(body, "dead-letter write of offset 1 failing") ||
		!strings.Contains(body, "does not exist: create it") && !strings.Contains(body, "the topic is missing or has no leader; create it") {
		t.Fatalf("/readyz %d %q; want 503 naming the offset and what to fix", code, body)
	}
	if v := scrape(t, srv.URL, committed); v != 1 {
		t.Fatalf("committed %v while offset 1 is unfinished, want 1", v)
	}
	var st telemetry.Status
	resp, err := http.Get(srv.URL + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || len(st.Partitions) != 1 || st.Partitions[0].DeadLetterBlocked == nil || st.Partitions[0].DeadLetterBlocked.Offset != 1 {
		t.Fatalf("status.json %+v (%v)", st, err)
	}
	if v := scrape(t, srv.URL, "patchflow_dead_letter_write_failures_total"); v < 3 {
		t.Fatalf("dead-letter write failures %v, want at least 3", v)
	}

	if err := admin.CreateTopic(cfg.Kafka.DLQTopic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the record to be dead-lettered and committed", func() bool { return scrape(t, srv.URL, committed) == 3 })
	eventually(t, "readiness to come back", func() bool { code, _ := get(t, srv.URL+"/readyz"); return code == 200 })
	if v := scrape(t, srv.URL, blocked); v != 0 {
		t.Fatalf("still blocked (%v) after the write succeeded", v)
	}
}

// A record that pins its partition while a span of records finish behind it
// stops admission there: /metrics, /status.json, the status page and /readyz
// say the partition is span-blocked and by which record, and the commit
// metadata, whose size is a metric, carries what finished behind it.
func TestSpanBlockedPartitionIsVisible(t *testing.T) {
	release := make(chan struct{})
	handler := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		if string(r.Value) == "stuck" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	cfg, bridge, metrics := startEmbeddedListener(t, map[string]string{"LISTENER_INFLIGHT_PER_PARTITION": "2", "LISTENER_SPAN_PER_PARTITION": "4"}, handler)
	readiness := &telemetry.Readiness{Bridge: bridge, PinLimit: 300 * time.Millisecond}
	srv := httptest.NewServer(telemetry.Handler(metrics, readiness, nil))
	defer srv.Close()
	eventually(t, "joining the group", func() bool { code, _ := get(t, srv.URL+"/readyz"); return code == 200 })

	produceValues(t, cfg, "stuck", "fine", "fine", "fine", "fine", "fine", "fine")
	labels := fmt.Sprintf(`{partition="0",topic=%q}`, cfg.Kafka.Topic)
	eventually(t, "the partition to be span-blocked", func() bool { return scrape(t, srv.URL, "patchflow_partition_span_blocked"+labels) == 1 })
	if v := scrape(t, srv.URL, "patchflow_partition_pinned_offset"+labels); v != 0 {
		t.Fatalf("pinned offset %v while span-blocked, want 0", v)
	}
	if v := scrape(t, srv.URL, `patchflow_records_total{outcome="ok"}`); v != 3 {
		t.Fatalf("%v records finished behind the pinned one, want the 3 its span of 4 holds", v)
	}
	eventually(t, "the metadata to carry the finished records", func() bool {
		return scrape(t, srv.URL, "patchflow_partition_commit_metadata_bytes"+labels) > 0
	})
	eventually(t, "readiness to name the span block", func() bool {
		code, body := get(t, srv.URL+"/readyz")
		return code == 503 && strings.Contains(body, "pinned") && strings.Contains(body, "by offset 0") && strings.Contains(body, "span-blocked")
	})
	var st telemetry.Status
	resp, err := http.Get(srv.URL + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || len(st.Partitions) != 1 || st.Partitions[0].SpanBlockedSeconds == nil || st.Partitions[0].SpanLimit != 4 ||
		st.Partitions[0].MetadataBytes == 0 {
		t.Fatalf("status.json %+v (%v)", st, err)
	}
	if code, body := get(t, srv.URL+"/status"); code != 200 || !strings.Contains(body, "span-blocked for") {
		t.Fatalf("status page %d does not show the span block:\n%s", code, body)
	}
	close(release)
	eventually(t, "every record committed", func() bool {
		return scrape(t, srv.URL, fmt.Sprintf("patchflow_partition_committed_offset%s", labels)) == 7
	})
	if v := scrape(t, srv.URL, "patchflow_partition_span_blocked"+labels); v != 0 {
		t.Fatalf("still span-blocked (%v) once the pinned record finished", v)
	}
}
