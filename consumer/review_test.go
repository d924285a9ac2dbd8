package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/embedded"
)

// A failure named with FailedIn is worth retrying unless classed
// otherwise: unclassified becomes transient; permanent and cancelled keep
// their class, and the dependency is named either way.
func TestFailedInMakesAnUnclassifiedFailureTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want messages.ErrorClass
	}{
		{errors.New("connection refused"), messages.ErrorClass_ERROR_CLASS_TRANSIENT},
		{consumer.Permanent(errors.New("400")), messages.ErrorClass_ERROR_CLASS_PERMANENT},
		{context.Canceled, messages.ErrorClass_ERROR_CLASS_CANCELLED},
	} {
		err := consumer.FailedIn("db", c.err)
		if got := messages.ClassOf(err); got != c.want || messages.DependencyOf(err) != "db" || !errors.Is(err, c.err) {
			t.Errorf("FailedIn(db, %v): class %v, dependency %q; want %v, db, wrapping it", c.err, got, messages.DependencyOf(err), c.want)
		}
	}
	if consumer.FailedIn("db", nil) != nil {
		t.Error("FailedIn of no error is an error")
	}
}

// README's handler shape during an outage of its dependency: every call
// fails, reported, and the handler returns FailedIn(dependency, err) with
// an unclassified err. Each record is tried more than MaxAttempts times and
// none is dead-lettered (before FailedIn made such an err transient, all
// were dead-lettered after their third attempt and this wait never ended).
func TestOutageOfAReportedDependencyDeadLettersNothing(t *testing.T) {
	broker, err := embedded.Start(2, "events")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	var mu sync.Mutex
	attempts := map[string]int{}
	h := &outageHandler{attempts: attempts, mu: &mu}
	cfg := consumer.Config{Brokers: broker.Addrs(), Topic: "events", Group: "outage", MaxAttempts: 3,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond}
	c, err := consumer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	var kv []string
	for i := range 10 {
		kv = append(kv, fmt.Sprint("k", i), "v")
	}
	if err := broker.Produce("events", kv...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every record tried at least 6 times (MaxAttempts 3)", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(attempts) < 10 {
			return false
		}
		for _, n := range attempts {
			if n < 6 {
				return false
			}
		}
		return true
	})
	if s := c.Stats(); s.DeadLettered != 0 {
		t.Fatalf("%d records dead-lettered during a shared outage (%v)", s.DeadLettered, s.DeadLetteredByReason)
	}
}

// outageHandler's dependency "db" fails every call.
type outageHandler struct {
	mu       *sync.Mutex
	attempts map[string]int
	report   func(context.Context, string, time.Duration, error)
}

func (h *outageHandler) ReportDependenciesTo(report func(context.Context, string, time.Duration, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.report = report
}

func (h *outageHandler) Handle(ctx context.Context, r *consumer.Record) error {
	h.mu.Lock()
	h.attempts[string(r.Key)]++
	report := h.report
	h.mu.Unlock()
	err := errors.New("dial tcp 10.0.0.7:5432: connection refused")
	report(ctx, "db", time.Millisecond, err)
	return consumer.FailedIn("db", err)
}

// New refuses what it cannot run with, naming the field; defaults follow
// the other field of a pair; sarama's four-part early versions may be
// written in three parts.
func TestConfigEdges(t *testing.T) {
	base := consumer.Config{Brokers: []string{"127.0.0.1:9092"}, Topic: "events", Group: "g"}
	h := consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil })
	for field, edit := range map[string]func(*consumer.Config){
		"Members":                func(c *consumer.Config) { c.Members = -1 },
		"CommitInterval":         func(c *consumer.Config) { c.CommitInterval = -time.Second },
		"ReadyPinLimit":          func(c *consumer.Config) { c.ReadyPinLimit = -time.Second },
		"HeartbeatInterval":      func(c *consumer.Config) { c.HeartbeatInterval = -time.Second },
		"Security.SASLMechanism": func(c *consumer.Config) { c.Security.SASLMechanism = "GSSAPI"; c.Security.SASLUser = "u" },
		"HTTP.ReadTimeout":       func(c *consumer.Config) { c.HTTP.ReadTimeout = -time.Second },
		"HTTP.IdleTimeout":       func(c *consumer.Config) { c.HTTP.IdleTimeout = -time.Second },
		"HTTP.MaxConns":          func(c *consumer.Config) { c.HTTP.MaxConns = 3 },
		"HTTP.MaxHeaderBytes":    func(c *consumer.Config) { c.HTTP.MaxHeaderBytes = 100 },
	} {
		cfg := base
		edit(&cfg)
		if _, err := consumer.New(cfg, h); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming it", field, err)
		}
	}
	for name, edit := range map[string]func(*consumer.Config){
		"a short session alone":  func(c *consumer.Config) { c.SessionTimeout = 6 * time.Second },
		"a short backoff alone":  func(c *consumer.Config) { c.BackoffMax = 50 * time.Millisecond },
		"a long backoff alone":   func(c *consumer.Config) { c.BackoffMin = 30 * time.Second },
		"a three-part 0.x":       func(c *consumer.Config) { c.KafkaVersion = "0.11.0"; c.Assignor = "range" },
		"no attempt timeout":     func(c *consumer.Config) { c.AttemptTimeout = -1 },
		"no commit metadata":     func(c *consumer.Config) { c.CommitMetadataMaxBytes = -1 },
		"no progress lines":      func(c *consumer.Config) { c.ProgressInterval = -1 },
		"SCRAM with a user":      func(c *consumer.Config) { c.Security.SASLMechanism = "SCRAM-SHA-512"; c.Security.SASLUser = "u" },
		"two members in process": func(c *consumer.Config) { c.Members = 2 },
		"a small HTTP cap":       func(c *consumer.Config) { c.HTTP.MaxConns = 4 },
	} {
		cfg := base
		edit(&cfg)
		if _, err := consumer.New(cfg, h); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := consumer.New(base, h, consumer.WithHealthCheck("db", time.Second, nil)); err == nil {
		t.Error("a health check without a check was accepted (it would crash Run)")
	}
	if _, err := consumer.New(base, h, consumer.Option{}); err == nil {
		t.Error("the zero Option was accepted")
	}
}

// The SASL password shows in no form a Config is printed or logged in.
func TestSecurityNeverShowsThePassword(t *testing.T) {
	cfg := consumer.Config{Topic: "t", Security: consumer.Security{SASLMechanism: "PLAIN", SASLUser: "u", SASLPassword: "hunter2"}}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "security", cfg.Security)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "security", cfg.Security)
	for _, shown := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprint(cfg.Security), logged.String()} {
		if strings.Contains(shown, "hunter2") {
			t.Errorf("the password shows: %s", shown)
		}
		if !strings.Contains(shown, "PLAIN") {
			t.Errorf("the rest of the settings do not show: %s", shown)
		}
	}
}

// A broker that takes connections and never answers: Run returns soon
// after its ctx ends instead of after sarama's timeouts (minutes), and
// what it had started ends once the connections close.
func TestRunEndsWithItsContextWhileReachingTheBrokers(t *testing.T) {
	// Runs last: the connect Run left behind ends within seconds of the
	// connections closing (sarama's metadata retries), before the package's
	// goroutine check.
	defer waitForNoGoroutine(t, "consumer.(*Consumer).connect", 20*time.Second)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close() // ends sarama's wait, and so the connect still under way
		}
	}()
	c, err := consumer.New(consumer.Config{Brokers: []string{ln.Addr().String()}, Topic: "events", Group: "g"},
		consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v, want nil: it stopped as asked", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run still reaching the brokers 10 s after its ctx ended")
	}
}

// waitForNoGoroutine waits until no goroutine's stack holds fn.
func waitForNoGoroutine(t *testing.T, fn string, limit time.Duration) {
	t.Helper()
	buf := make([]byte, 1<<20)
	waitFor(t, "no goroutine in "+fn, limit, func() bool {
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
	})
}
