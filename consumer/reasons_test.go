package consumer_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/embedded"
)

// A handler whose reasons, and whose error's text, are not valid UTF-8 (a
// reason or a detail built from the input, say) costs neither its records
// nor the metrics: the skipped record is committed and counted, the broken
// one dead-lettered, and /metrics answers with the reasons as
// messages.Reason.Clean keeps them. Before, every scrape failed (the
// Prometheus client refuses such a label value), and the dead letter could
// not be encoded (protobuf refuses such a string), so its write was retried
// for good and the partition never committed past it.
func TestReasonsThatAreNotUTF8CostNeitherRecordsNorMetrics(t *testing.T) {
	broker, err := embedded.Start(1, "events")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	h := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		if string(r.Value) == "skip" {
			return consumer.Skip("skip \xff\n", "detail \xfe")
		}
		return consumer.Permanent(&messages.ValidationError{Reason: "broken \xfe", Detail: "field \xff\x00 is bad"})
	})
	reg := prometheus.NewRegistry()
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "events", Group: "reasons"}, h, consumer.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	produce(t, broker.Addrs(), "events", []string{"a", "b"}, []string{"skip", "broken"})
	waitFor(t, "the skip counted and the dead letter written", 20*time.Second, func() bool {
		s := c.Stats()
		return s.Skipped == 1 && s.DeadLettered == 1
	})
	letter := readDeadLetter(t, broker.Addrs(), "events.dlq")
	if got, want := letter.GetReason(), "broken \ufffd"; got != want {
		t.Errorf("dead letter's reason %q, want %q", got, want)
	}
	if got := letter.GetError(); !strings.Contains(got, "field \ufffd") {
		t.Errorf("dead letter's error %q: want the text with U+FFFD for the bytes that are not UTF-8", got)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics answered %d: %.300s", resp.StatusCode, body)
	}
	for _, want := range []string{
		"patchflow_records_skipped_total{reason=\"skip \ufffd\\\\n\",topic=\"events\"} 1",
		"patchflow_records_dead_lettered_total{reason=\"broken \ufffd\",topic=\"events\"} 1",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
