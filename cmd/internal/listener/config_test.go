package listener_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/limit"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/cmd/internal/listener"
	"github.com/patchflow/patchflow/cmd/internal/settings"
)

// lookup serves kv, with the simulated handler unless kv chooses.
func lookup(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		if !ok && k == "LISTENER_HANDLER" {
			return "simulated", true
		}
		return v, ok
	}
}

func TestParseDefaults(t *testing.T) {
	cfg, _, err := listener.Parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "k1:9092, k2:9092"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Brokers) != 2 || cfg.Brokers[1] != "k2:9092" || cfg.Embedded {
		t.Fatalf("brokers %v", cfg.Brokers)
	}
	k, p := cfg.Kafka, cfg.Pipeline
	if k.Topic != "platform.inventory.events" || k.DLQTopic != "platform.inventory.events.dlq" || k.Assignor != "cooperative-sticky" ||
		k.Isolation != "read_committed" {
		t.Fatalf("kafka %+v", k)
	}
	if p.InFlightPerPartition != 64 || p.InFlightTotal != 1024 || p.Ordering != ordering.ByKey || p.DrainTimeout != 20*time.Second || p.ConsumerGroup != k.Group {
		t.Fatalf("pipeline %+v", p)
	}
	if cfg.ReadyPinLimit != 5*time.Minute || cfg.ReadyDBGrace != 10*time.Second {
		t.Fatalf("readiness: pin limit %v, database grace %v", cfg.ReadyPinLimit, cfg.ReadyDBGrace)
	}
	if p.Concurrency != actors.ConcurrencyAdaptive || p.ConcurrencyFloor != 8 || p.ConcurrencyLaw != limit.Gradient {
		t.Fatalf("concurrency %v, floor %d, law %v; want adaptive, 8, gradient", p.Concurrency, p.ConcurrencyFloor, p.ConcurrencyLaw)
	}
	cfg, _, err = listener.Parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY": "fixed",
		"LISTENER_CONCURRENCY_FLOOR": "4", "LISTENER_CONCURRENCY_LAW": "vegas"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Pipeline; p.Concurrency != actors.ConcurrencyFixed || p.ConcurrencyFloor != 4 || p.ConcurrencyLaw != limit.Vegas {
		t.Fatalf("concurrency %v, floor %d, law %v; want fixed, 4, vegas", p.Concurrency, p.ConcurrencyFloor, p.ConcurrencyLaw)
	}
}

// Each bad value is rejected with an error naming its setting.
func TestParseRejectsBadSettings(t *testing.T) {
	cases := []struct {
		env  map[string]string
		name string
	}{
		{map[string]string{}, "KAFKA_BROKERS"},
		{map[string]string{"KAFKA_BROKERS": "nohostport"}, "KAFKA_BROKERS"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_TOPIC": " "}, "KAFKA_TOPIC"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_VERSION": "banana"}, "KAFKA_VERSION"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_VERSION": "2.1.0"}, "KAFKA_VERSION"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_ASSIGNOR": "magic"}, "KAFKA_ASSIGNOR"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_ISOLATION_LEVEL": "snapshot"}, "KAFKA_ISOLATION_LEVEL"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_DLQ_TOPIC": "platform.inventory.events"}, "KAFKA_DLQ_TOPIC"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONSUMERS": "0"}, "LISTENER_CONSUMERS"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_INFLIGHT_PER_PARTITION": "-1"}, "LISTENER_INFLIGHT_PER_PARTITION"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_INFLIGHT_TOTAL": "x"}, "LISTENER_INFLIGHT_TOTAL"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_ORDERING": "fifo"}, "LISTENER_ORDERING"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY": "elastic"}, "LISTENER_CONCURRENCY"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY_FLOOR": "0"}, "LISTENER_CONCURRENCY_FLOOR"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY_LAW": "pid"}, "LISTENER_CONCURRENCY_LAW"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_DRAIN_TIMEOUT": "1ms"}, "LISTENER_DRAIN_TIMEOUT"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_MAX_ATTEMPTS": "0"}, "LISTENER_MAX_ATTEMPTS"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_BACKOFF_MIN": "fast"}, "LISTENER_BACKOFF_MIN"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_BACKOFF_MIN": "2s", "LISTENER_BACKOFF_MAX": "1s"}, "LISTENER_BACKOFF_MAX"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "evaluate", "VMAAS_URL": "http://vmaas:8080"}, "DATABASE_URL"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "evaluate", "DATABASE_URL": "postgres://db/x"}, "VMAAS_URL"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "evaluate", "DATABASE_URL": "postgres://db/x", "VMAAS_URL": "vmaas:8080"}, "VMAAS_URL"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "evaluate", "DATABASE_URL": "postgres://db/x", "VMAAS_URL": "http://v", "INVENTORY_URL": "ftp://x"}, "INVENTORY_URL"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "magic"}, "LISTENER_HANDLER"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "DB_MAX_OPEN_CONNS": "0"}, "DB_MAX_OPEN_CONNS"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "VMAAS_TIMEOUT": "forever"}, "VMAAS_TIMEOUT"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "MAX_MESSAGE_BYTES": "10"}, "MAX_MESSAGE_BYTES"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_SASL_MECHANISM": "GSSAPI"}, "KAFKA_SASL_MECHANISM"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"}, "KAFKA_SASL_USER"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_TLS_CERT_FILE": "/etc/c.pem"}, "KAFKA_TLS_KEY_FILE"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_TLS": "maybe"}, "KAFKA_TLS"},
	}
	for _, c := range cases {
		_, _, err := listener.Parse(nil, lookup(c.env))
		var se *settings.Error
		if !errors.As(err, &se) || se.Env != c.name {
			t.Errorf("env %v: got %v, want an error naming %s", c.env, err, c.name)
		}
	}
}

func TestEvaluateHandlerSettings(t *testing.T) {
	cfg, set, err := listener.Parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "evaluate",
		"DATABASE_URL": "postgres://patch:hunter2@db:5432/patch", "VMAAS_URL": "http://vmaas:8080", "ALLOWED_REPORTERS": " puptoo , yupana "}))
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Domain
	if d.DatabaseURL != "postgres://patch:hunter2@db:5432/patch" || d.Pool.MaxOpen != 32 || d.VMaaSCacheSize != 10000 {
		t.Fatalf("%+v", d)
	}
	if len(d.Validation.AllowedReporters) != 2 || d.Validation.AllowedReporters[1] != "yupana" || d.Validation.ExcludedHostTypes[0] != "edge" {
		t.Fatalf("validation %+v", d.Validation)
	}
	for _, v := range set.Effective() {
		if s, ok := v.(string); ok && strings.Contains(s, "hunter2") {
			t.Fatalf("effective configuration leaks the database password: %v", set.Effective())
		}
	}
}

func TestFlagsOverrideEnvironment(t *testing.T) {
	cfg, _, err := listener.Parse([]string{"-inflight-total", "32", "-ordering", "unordered", "-kafka-isolation-level", "read_uncommitted"},
		lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_INFLIGHT_TOTAL": "8", "KAFKA_ISOLATION_LEVEL": "read_committed"}))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Embedded || cfg.Pipeline.InFlightTotal != 32 || cfg.Pipeline.Ordering != ordering.Unordered {
		t.Fatalf("%+v", cfg.Pipeline)
	}
	if cfg.Kafka.Isolation != "read_uncommitted" {
		t.Fatalf("isolation %q, want the flag's read_uncommitted", cfg.Kafka.Isolation)
	}
}
