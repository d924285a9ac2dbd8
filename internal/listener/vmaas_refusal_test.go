package listener_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/evaluation"
	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/persistence/pgtest"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/platform"
)

// failureCounter is the evaluating handler, counting each record's failed
// attempts by key. It keeps the handler's DependencyReporter (embedded), so
// the pipeline hears its VMaaS calls as it would without it.
type failureCounter struct {
	*evaluation.Handler
	mu       sync.Mutex
	failures map[string]int
}

func (h *failureCounter) Handle(ctx context.Context, r *consumer.Record) error {
	err := h.Handler.Handle(ctx, r)
	if err != nil {
		h.mu.Lock()
		h.failures[string(r.Key)]++
		h.mu.Unlock()
	}
	return err
}

// fewest returns the fewest failures of any of keys.
func (h *failureCounter) fewest(keys []string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	least := -1
	for _, k := range keys {
		if n := h.failures[k]; least < 0 || n < least {
			least = n
		}
	}
	return least
}

// VMaaS, or an auth proxy in front of it, answering 403 to every call fails
// every record alike: a shared outage, not each record's own failure. No
// record is dead-lettered while it lasts, however many times each fails;
// once VMaaS serves again every host is stored with its evaluation.
func TestVMaaSRefusingEveryCallDeadLettersNothing(t *testing.T) {
	const records, maxAttempts = 50, 3
	ds := platform.NewDataset(7, platform.DatasetSize{Packages: 400, Repos: 20, Advisories: 300})
	shape := platform.ProfileShape{Packages: 40, Repos: 10}
	mock, err := platform.NewServer(ds, platform.ServerOptions{Shape: shape})
	if err != nil {
		t.Fatal(err)
	}
	var refusing atomic.Bool
	refusing.Store(true)
	vmaas := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refusing.Load() {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		mock.ServeHTTP(w, r)
	}))
	t.Cleanup(vmaas.Close)

	// Fixed concurrency, so that all 50 are in flight at once: the adaptive
	// limit would shed to its floor during the outage and leave the others
	// waiting for admission, never failing.
	env := map[string]string{"LISTENER_HANDLER": "evaluate", "DATABASE_URL": pgtest.URL(t), "VMAAS_URL": vmaas.URL,
		"KAFKA_BROKERS": "embedded", "EMBEDDED_PARTITIONS": "1", "LISTENER_HTTP_ADDR": "", "LISTENER_PROGRESS_INTERVAL": "0",
		"LISTENER_MAX_ATTEMPTS": fmt.Sprint(maxAttempts), "LISTENER_BACKOFF_MIN": "10ms", "LISTENER_BACKOFF_MAX": "50ms",
		"LISTENER_CONCURRENCY": "fixed", "VMAAS_CACHE_SIZE": "0"}
	cfg, _, err := parse(nil, lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	domain, err := listener.NewDomain(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(domain.Close) // after the listener stops: registered first
	handler := &failureCounter{Handler: domain.Evaluator, failures: map[string]int{}}
	bridge := runListener(t, cfg, handler, listener.Hooks{Ping: domain.Ping, PingVMaaS: domain.PingVMaaS})

	hosts := make([]string, records)
	events := map[string][]byte{}
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("0f7f3c1e-9a52-4d6b-8e1a-%012d", i)
		ev, err := ds.Event(platform.EventSpec{Type: "created", HostID: hosts[i], OrgID: "org-7", Timestamp: t0}, shape)
		if err != nil {
			t.Fatal(err)
		}
		events[hosts[i]] = ev
	}
	produceKeyed(t, cfg, hosts, events)

	// While VMaaS refuses, wait until every record has failed more often
	// than LISTENER_MAX_ATTEMPTS allows a record's own failures (read as
	// its own, each would be dead-lettered by then), or one is
	// dead-lettered.
	stats := bridge.Stats()
	eventually(t, "every record failing past its attempts, or a dead letter", func() bool {
		return handler.fewest(hosts) > maxAttempts || stats.Snapshot().DeadLettered > 0
	})
	if s := stats.Snapshot(); s.DeadLettered != 0 {
		t.Fatalf("VMaaS refusing every call: %d of %d records dead-lettered (%v), want none: the outage is shared",
			s.DeadLettered, records, s.DeadLetteredByReason)
	}

	refusing.Store(false)
	eventually(t, "every record stored", func() bool { return stats.Snapshot().Succeeded+stats.Snapshot().DeadLettered >= records })
	if s := stats.Snapshot(); s.DeadLettered != 0 || s.Succeeded != records {
		t.Fatalf("after VMaaS served again: %d succeeded, %d dead-lettered (%v); want %d and none", s.Succeeded, s.DeadLettered, s.DeadLetteredByReason, records)
	}
	for _, h := range hosts {
		st, err := domain.Store.LoadSystem(context.Background(), "org-7", h)
		if err != nil {
			t.Fatalf("host %s: %v", h, err)
		}
		p := ds.Profile(h, 0, shape)
		want := ds.Evaluate(p.Packages, p.EnabledRepos())
		got := map[string]string{}
		for name, s := range st.Advisories {
			got[name] = string(s)
		}
		if st.LastEvaluatedEventTime == nil || !reflect.DeepEqual(got, want.Advisories) {
			t.Fatalf("host %s stored with %d advisories (evaluated: %v), the dataset says %d", h, len(got), st.LastEvaluatedEventTime != nil, len(want.Advisories))
		}
	}
}

// runListener runs the listener with handler and hooks on an in-process
// broker of one partition until the test ends, and returns its bridge.
func runListener(t *testing.T, cfg *listener.Config, handler consumer.Handler, hooks listener.Hooks) *actors.Bridge {
	t.Helper()
	cluster, err := embedded.Start(1, cfg.Kafka.Topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cfg.Brokers, cfg.Kafka.Brokers = cluster.Addrs(), cluster.Addrs()
	bridges := make(chan *actors.Bridge, 1)
	hooks.Started = func(b *actors.Bridge) { bridges <- b }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- listener.RunWith(ctx, cfg, handler, slog.New(slog.DiscardHandler), hooks) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case b := <-bridges:
		return b
	case err := <-done:
		t.Fatalf("listener: %v", err)
		return nil
	}
}

// produceKeyed writes each key's value to the listener's topic, keyed by it.
func produceKeyed(t *testing.T, cfg *listener.Config, keys []string, values map[string][]byte) {
	t.Helper()
	pcfg := sarama.NewConfig()
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.MaxMessageBytes = 8 << 20
	p, err := sarama.NewSyncProducer(cfg.Brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, k := range keys {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: cfg.Kafka.Topic, Key: sarama.StringEncoder(k), Value: sarama.ByteEncoder(values[k])}); err != nil {
			t.Fatal(err)
		}
	}
}
