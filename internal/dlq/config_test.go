package dlq_test

import (
	"strings"
	"testing"

	"github.com/patchflow/patchflow/internal/dlq"
)

// The dead-letter topic is the listener's by default, named after
// KAFKA_TOPIC, unless KAFKA_DLQ_TOPIC names it; -offset takes oldest,
// newest or an offset, and bad values name their setting.
func TestParse(t *testing.T) {
	cfg, _, err := dlq.Parse(nil, env(map[string]string{"KAFKA_BROKERS": "k1:9092, k2:9092"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Topic != "platform.inventory.events.dlq" || cfg.From != dlq.FromOldest || cfg.Partition != -1 || cfg.Follow || cfg.JSON || cfg.Value ||
		len(cfg.Brokers) != 2 || cfg.Brokers[1] != "k2:9092" {
		t.Fatalf("defaults %+v", cfg)
	}
	cfg, _, err = dlq.Parse([]string{"-offset", "120", "-partition", "3", "-json", "-follow"}, env(map[string]string{"KAFKA_BROKERS": "k:9092", "KAFKA_TOPIC": "events"}))
	if err != nil || cfg.Topic != "events.dlq" || cfg.Offset != 120 || cfg.Partition != 3 || !cfg.JSON || !cfg.Follow {
		t.Fatalf("%+v, %v", cfg, err)
	}
	cfg, _, err = dlq.Parse(nil, env(map[string]string{"KAFKA_BROKERS": "k:9092", "KAFKA_TOPIC": "events", "KAFKA_DLQ_TOPIC": "dead"}))
	if err != nil || cfg.Topic != "dead" {
		t.Fatalf("%+v, %v", cfg, err)
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{}, nil, "KAFKA_BROKERS"},
		{map[string]string{"KAFKA_BROKERS": "k"}, nil, "not host:port"},
		{map[string]string{"KAFKA_BROKERS": "k:9092"}, []string{"-offset", "-3"}, "DLQ_OFFSET"},
		{map[string]string{"KAFKA_BROKERS": "k:9092"}, []string{"-offset", "end"}, "DLQ_OFFSET"},
		{map[string]string{"KAFKA_BROKERS": "k:9092", "KAFKA_SASL_MECHANISM": "PLAIN"}, nil, "KAFKA_SASL_USER"},
		{map[string]string{"KAFKA_BROKERS": "k:9092", "KAFKA_SASL_MECHANISM": "GSSAPI"}, nil, "KAFKA_SASL_MECHANISM"},
	} {
		if _, _, err := dlq.Parse(c.args, env(c.env)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: error %v, want one naming %s", c.env, c.args, err, c.want)
		}
	}
}
