package listener_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/limit"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/internal/settings"
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
	cfg, _, err := parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "k1:9092, k2:9092"}))
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
	if p.Concurrency != actors.ConcurrencyAdaptive || p.ConcurrencyFloor != 8 || p.ConcurrencyLaw != limit.Gradient || p.ConcurrencyTolerance != 1 {
		t.Fatalf("concurrency %v, floor %d, law %v, tolerance %v; want adaptive, 8, gradient, 1", p.Concurrency, p.ConcurrencyFloor, p.ConcurrencyLaw, p.ConcurrencyTolerance)
	}
	cfg, _, err = parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY": "fixed",
		"LISTENER_CONCURRENCY_FLOOR": "4", "LISTENER_CONCURRENCY_LAW": "vegas", "LISTENER_CONCURRENCY_TOLERANCE": "1.5"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Pipeline; p.Concurrency != actors.ConcurrencyFixed || p.ConcurrencyFloor != 4 || p.ConcurrencyLaw != limit.Vegas || p.ConcurrencyTolerance != 1.5 {
		t.Fatalf("concurrency %v, floor %d, law %v, tolerance %v; want fixed, 4, vegas, 1.5", p.Concurrency, p.ConcurrencyFloor, p.ConcurrencyLaw, p.ConcurrencyTolerance)
	}
	if got := cfg.Pipeline.LimitConfig().Tolerance; got != 1.5 {
		t.Fatalf("the controller's tolerance is %v, want the setting's 1.5", got)
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
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HTTP_MAX_CONNS": "3"}, "LISTENER_HTTP_MAX_CONNS"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HTTP_READ_TIMEOUT": "0s"}, "LISTENER_HTTP_READ_TIMEOUT"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HTTP_MAX_HEADER_BYTES": "512"}, "LISTENER_HTTP_MAX_HEADER_BYTES"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY": "elastic"}, "LISTENER_CONCURRENCY"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY_FLOOR": "0"}, "LISTENER_CONCURRENCY_FLOOR"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY_LAW": "pid"}, "LISTENER_CONCURRENCY_LAW"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY_TOLERANCE": "0.9"}, "LISTENER_CONCURRENCY_TOLERANCE"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY_TOLERANCE": "5"}, "LISTENER_CONCURRENCY_TOLERANCE"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY_TOLERANCE": "NaN"}, "LISTENER_CONCURRENCY_TOLERANCE"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_CONCURRENCY": "fixed", "LISTENER_CONCURRENCY_TOLERANCE": "NaN"}, "LISTENER_CONCURRENCY_TOLERANCE"},
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
		{map[string]string{"KAFKA_BROKERS": "embedded", "EVENT_MAX_FUTURE_SKEW": "0s"}, "EVENT_MAX_FUTURE_SKEW"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_SASL_MECHANISM": "GSSAPI"}, "KAFKA_SASL_MECHANISM"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"}, "KAFKA_SASL_USER"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_TLS_CERT_FILE": "/etc/c.pem"}, "KAFKA_TLS_KEY_FILE"},
		{map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_TLS": "maybe"}, "KAFKA_TLS"},
	}
	for _, c := range cases {
		_, _, err := parse(nil, lookup(c.env))
		var se *settings.Error
		if !errors.As(err, &se) || se.Env != c.name {
			t.Errorf("env %v: got %v, want an error naming %s", c.env, err, c.name)
		}
	}
}

func TestEvaluateHandlerSettings(t *testing.T) {
	cfg, set, err := parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "evaluate",
		"DATABASE_URL": "postgres://patch:hunter2@db:5432/patch", "VMAAS_URL": "http://vmaas:8080", "ALLOWED_REPORTERS": " puptoo , yupana ",
		"EVENT_MAX_FUTURE_SKEW": "90s"}))
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Domain
	if d.DatabaseURL != "postgres://patch:hunter2@db:5432/patch" || d.Pool.MaxOpen != 32 || d.VMaaSCacheSize != 500 || d.AnswersMB != 64 {
		t.Fatalf("%+v", d)
	}
	if len(d.Validation.AllowedReporters) != 2 || d.Validation.AllowedReporters[1] != "yupana" || d.Validation.ExcludedHostTypes[0] != "edge" ||
		d.Validation.MaxFutureSkew != 90*time.Second {
		t.Fatalf("validation %+v", d.Validation)
	}
	for _, v := range set.Effective() {
		if s, ok := v.(string); ok && strings.Contains(s, "hunter2") {
			t.Fatalf("effective configuration leaks the database password: %v", set.Effective())
		}
	}
}

func TestFlagsOverrideEnvironment(t *testing.T) {
	cfg, _, err := parse([]string{"-inflight-total", "32", "-ordering", "unordered", "-kafka-isolation-level", "read_uncommitted"},
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

// DATABASE_URL is checked with the other settings: the forms lib/pq takes
// are accepted, a malformed one is a settings error naming DATABASE_URL,
// whose text never shows the password.
func TestParseChecksDatabaseURL(t *testing.T) {
	for _, ok := range []string{
		"postgres://patch:p%40ss%2Fw%3Fr%23d@db.example:5432/patch?sslmode=verify-full",
		"postgresql://patch@db.example/patch",
		"host=db.example user=patch password='p@ss w0rd' dbname=patch",
	} {
		cfg, set, err := parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "evaluate",
			"DATABASE_URL": ok, "VMAAS_URL": "http://vmaas:8080"}))
		if err != nil {
			t.Errorf("DATABASE_URL=%s: %v", ok, err)
			continue
		}
		if cfg.Domain.DatabaseURL != ok {
			t.Errorf("DATABASE_URL read as %q, want %q", cfg.Domain.DatabaseURL, ok)
		}
		if eff := fmt.Sprint(set.Effective()...); strings.Contains(eff, "p%40ss") || strings.Contains(eff, "p@ss") || !strings.Contains(eff, "db.example") {
			t.Errorf("effective configuration %s", eff)
		}
	}
	const password = "Jq4vTzWk"
	for _, bad := range []string{
		"postgres://patch:" + password + "@db.example:54x2/patch",
		"mysql://patch:" + password + "@db.example/patch",
		"postgres://patch:" + password + "/x@db.example/patch",
		"host=db.example port=x password=" + password,
	} {
		// with either handler: a value given is checked
		for _, handler := range []string{"evaluate", "simulated"} {
			_, _, err := parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": handler,
				"DATABASE_URL": bad, "VMAAS_URL": "http://vmaas:8080"}))
			var se *settings.Error
			if !errors.As(err, &se) || se.Env != "DATABASE_URL" {
				t.Errorf("DATABASE_URL=%s (%s): got %v, want an error naming DATABASE_URL", bad, handler, err)
				continue
			}
			if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), "Jq4v") {
				t.Errorf("the error shows the password: %v", err)
			}
		}
	}
}

// The HTTP base URLs and the brokers may carry credentials: their errors
// and the effective configuration never show them.
func TestParseHidesCredentialsOfOtherURLs(t *testing.T) {
	const password = "Rm8bYxQe"
	base := map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "evaluate", "DATABASE_URL": "postgres://db/x", "VMAAS_URL": "http://vmaas:8080"}
	cases := []struct {
		env, value string
	}{
		{"VMAAS_URL", "ftp://user:" + password + "@vmaas:8080"},
		{"VMAAS_URL", "http://user:" + password + "@vmaas:80x0"},
		{"VMAAS_URL", "user:" + password + "@vmaas:8080"},
		{"INVENTORY_URL", "ftp://user:" + password + "@inventory"},
		{"INVENTORY_URL", "http://user:" + password + "/x@inventory:80x0"},
		{"KAFKA_BROKERS", "user:" + password + "@kafka-1:9092"},
		{"KAFKA_BROKERS", "kafka-1:9092,SASL_SSL://user:" + password + "@kafka-2:9093"},
	}
	for _, c := range cases {
		env := maps.Clone(base)
		env[c.env] = c.value
		_, _, err := parse(nil, lookup(env))
		var se *settings.Error
		if !errors.As(err, &se) || se.Env != c.env {
			t.Errorf("%s=%s: got %v, want an error naming %s", c.env, c.value, err, c.env)
			continue
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("%s: the error shows the password: %v", c.env, err)
		}
	}
	env := maps.Clone(base)
	env["VMAAS_URL"] = "http://user:" + password + "@vmaas:8080"
	env["INVENTORY_URL"] = "https://user:" + password + "@inventory"
	_, set, err := parse(nil, lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	if eff := fmt.Sprint(set.Effective()...); strings.Contains(eff, password) || !strings.Contains(eff, "@vmaas:8080") || !strings.Contains(eff, "@inventory") {
		t.Errorf("effective configuration %s", eff)
	}
}

// The decompression limit follows MAX_MESSAGE_BYTES unless set, and reaches
// the consumer's configuration: without it, sarama decompresses a batch
// whole, however large (a compression bomb of a few KB held 1.2 GiB).
func TestDecompressionLimitFollowsTheMessageLimit(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want int
	}{
		{map[string]string{}, 8 << 20}, // 8 × 1,000,000 is below the floor, a zstd window of 8 MiB
		{map[string]string{"MAX_MESSAGE_BYTES": "2000000"}, 16_000_000},
		{map[string]string{"MAX_MESSAGE_BYTES": "2000000", "KAFKA_MAX_DECOMPRESSED_BATCH_BYTES": "3000000"}, 3_000_000},
	} {
		env := map[string]string{"KAFKA_BROKERS": "embedded"}
		maps.Copy(env, c.env)
		cfg, _, err := parse(nil, lookup(env))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.ConsumerConfig().MaxDecompressedBatchBytes; got != c.want {
			t.Errorf("%v: the consumer's decompression limit is %d, want %d", c.env, got, c.want)
		}
	}
	if _, _, err := parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "KAFKA_MAX_DECOMPRESSED_BATCH_BYTES": "-1"})); err == nil ||
		!strings.Contains(err.Error(), "KAFKA_MAX_DECOMPRESSED_BATCH_BYTES") {
		t.Errorf("a negative decompression limit: error %v, want one naming KAFKA_MAX_DECOMPRESSED_BATCH_BYTES", err)
	}
}
