package listener_test

import (
	"errors"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/cmd/internal/listener"
	"github.com/patchflow/patchflow/cmd/internal/settings"
)

func lookup(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
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
	if k.Topic != "platform.inventory.events" || k.DLQTopic != "platform.inventory.events.dlq" || k.Assignor != "cooperative-sticky" {
		t.Fatalf("kafka %+v", k)
	}
	if p.InFlightPerPartition != 64 || p.InFlightTotal != 1024 || p.Ordering != ordering.ByKey || p.DrainTimeout != 20*time.Second || p.ConsumerGroup != k.Group {
		t.Fatalf("pipeline %+v", p)
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
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_DLQ_TOPIC": "platform.inventory.events"}, "KAFKA_DLQ_TOPIC"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONSUMERS": "0"}, "LISTENER_CONSUMERS"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_INFLIGHT_PER_PARTITION": "-1"}, "LISTENER_INFLIGHT_PER_PARTITION"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_INFLIGHT_TOTAL": "x"}, "LISTENER_INFLIGHT_TOTAL"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_ORDERING": "fifo"}, "LISTENER_ORDERING"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_DRAIN_TIMEOUT": "1ms"}, "LISTENER_DRAIN_TIMEOUT"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_MAX_ATTEMPTS": "0"}, "LISTENER_MAX_ATTEMPTS"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_BACKOFF_MIN": "fast"}, "LISTENER_BACKOFF_MIN"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_BACKOFF_MIN": "2s", "LISTENER_BACKOFF_MAX": "1s"}, "LISTENER_BACKOFF_MAX"},
	}
	for _, c := range cases {
		_, _, err := listener.Parse(nil, lookup(c.env))
		var se *settings.Error
		if !errors.As(err, &se) || se.Env != c.name {
			t.Errorf("env %v: got %v, want an error naming %s", c.env, err, c.name)
		}
	}
}

func TestFlagsOverrideEnvironment(t *testing.T) {
	cfg, _, err := listener.Parse([]string{"-inflight-total", "32", "-ordering", "unordered"},
		lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_INFLIGHT_TOTAL": "8"}))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Embedded || cfg.Pipeline.InFlightTotal != 32 || cfg.Pipeline.Ordering != ordering.Unordered {
		t.Fatalf("%+v", cfg.Pipeline)
	}
}
