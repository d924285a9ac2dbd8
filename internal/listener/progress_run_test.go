package listener_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/embedded"
)

// lines returns the JSON log lines whose message starts with prefix.
func (b *lockedBuffer) lines(t *testing.T, prefix string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue // nothing logged yet
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if msg, _ := m["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// What an operator reads at INFO: a warning naming the database while it
// fails for every record, "caught up" once everything is read and finished,
// and at shutdown how many partitions are drained.
func TestListenerSaysWhatIsHappening(t *testing.T) {
	all := map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HTTP_ADDR": "", "LISTENER_PROGRESS_INTERVAL": "0",
		"LISTENER_BACKOFF_MIN": "10ms", "LISTENER_BACKOFF_MAX": "50ms"}
	cfg, _, err := parse(nil, lookup(all))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := embedded.Start(2, cfg.Kafka.Topic)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cfg.Brokers, cfg.Kafka.Brokers = cluster.Addrs(), cluster.Addrs()

	var down atomic.Bool
	down.Store(true)
	var deps atomic.Pointer[actors.Dependencies]
	handler := consumer.HandlerFunc(func(ctx context.Context, _ *consumer.Record) error {
		if down.Load() {
			deps.Load().Observe(ctx, messages.DependencyDatabase, time.Millisecond, false) // as the domain reports its calls
			return messages.FailedIn(messages.DependencyDatabase, messages.Transient(errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")))
		}
		return nil
	})
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		done <- listener.RunWith(ctx, cfg, handler, slog.New(slog.NewJSONHandler(&logs, nil)),
			listener.Hooks{Started: func(b *actors.Bridge) { deps.Store(b.Dependencies()); close(started) }})
	}()
	<-started
	produceValues(t, cfg, "a", "b", "c", "d")

	eventually(t, "a warning naming the database", func() bool { return len(logs.lines(t, "dependency database failing")) > 0 })
	w := logs.lines(t, "dependency database failing")[0]
	if w["level"] != "WARN" || w["dependency"] != "database" || !strings.Contains(w["error"].(string), "connection refused") ||
		w["records_retrying"].(float64) < 1 {
		t.Fatalf("warning %v; want WARN naming the database, its error and the records retrying", w)
	}
	if n := len(logs.lines(t, "caught up")); n != 0 {
		t.Fatalf("%d caught-up lines while every record fails", n)
	}
	down.Store(false)
	eventually(t, "caught up", func() bool { return len(logs.lines(t, "caught up")) == 1 })

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d := logs.lines(t, "draining ")
	if len(d) != 1 || d[0]["msg"] != "draining 2 partitions" || d[0]["partitions"] != 2.0 {
		t.Fatalf("drain lines %v; want one saying draining 2 partitions", d)
	}
}

// A missing event topic stops the listener with the consumer's error and
// the listener's own ways to create it; the library's error names none.
func TestMissingTopicNamesTheListenersTools(t *testing.T) {
	all := map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HTTP_ADDR": "", "LISTENER_PROGRESS_INTERVAL": "0"}
	cfg, _, err := parse(nil, lookup(all))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := embedded.Start(1, "another.topic")
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cfg.Brokers, cfg.Kafka.Brokers = cluster.Addrs(), cluster.Addrs()
	handler := consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = listener.RunWith(ctx, cfg, handler, slog.New(slog.DiscardHandler), listener.Hooks{})
	if err == nil {
		t.Fatal("the listener ran without its topic")
	}
	for _, want := range []string{cfg.Kafka.Topic + `" does not exist`, "KAFKA_TOPIC", "bin/loadgen -create-topic", "make kafka-up"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
