package clowder_test

import (
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/patchflow/patchflow/internal/clowder"
)

// The fixture is a cdappconfig.json Clowder's own schema accepts.
func TestFixtureIsValidAgainstClowdersSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile("testdata/cdappconfig.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"testdata/cdappconfig.json"} {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	// And the schema refuses what the reader would refuse too: a broker
	// without a hostname.
	var bad any
	_ = json.Unmarshal([]byte(`{"metricsPort":9000,"metricsPath":"/metrics","logging":{"type":"null"},"kafka":{"brokers":[{"port":9092}],"topics":[]}}`), &bad)
	if err := sch.Validate(bad); err == nil {
		t.Fatal("the schema accepted a broker without a hostname")
	}
}

var topics = map[string]string{
	"KAFKA_TOPIC":           "platform.inventory.events",
	"REMEDIATIONS_TOPIC":    "platform.remediation-updates.patch",
	"NOTIFICATIONS_TOPIC":   "platform.notifications.ingress",
	"PAYLOAD_TRACKER_TOPIC": "platform.payload-status",
}

// What the listener takes from the file: brokers, TLS with the CA in a
// file, SASL, the topics' names on the brokers, the database URL with its
// CA, the metrics port.
func TestSettingsFromTheFile(t *testing.T) {
	c, err := clowder.Load("testdata/cdappconfig.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := c.Settings(dir, topics)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"KAFKA_BROKERS":         "kafka-0.kafka.svc:9093,kafka-1.kafka.svc:9093",
		"KAFKA_TLS":             "true",
		"KAFKA_SASL_MECHANISM":  "SCRAM-SHA-512",
		"KAFKA_SASL_USER":       "patch-user",
		"KAFKA_SASL_PASSWORD":   "s3cr3t-pass",
		"KAFKA_TOPIC":           "platform.inventory.events-env1",
		"REMEDIATIONS_TOPIC":    "platform.remediation-updates.patch-env1",
		"NOTIFICATIONS_TOPIC":   "platform.notifications.ingress-env1",
		"PAYLOAD_TRACKER_TOPIC": "platform.payload-status-env1",
		"LISTENER_HTTP_ADDR":    ":9000",
	}
	for k, v := range want {
		if s[k] != v {
			t.Errorf("%s = %q, want %q", k, s[k], v)
		}
	}
	if ca, err := os.ReadFile(s["KAFKA_TLS_CA_FILE"]); err != nil || !strings.Contains(string(ca), "MIIBfake") {
		t.Errorf("KAFKA_TLS_CA_FILE %q: %q %v", s["KAFKA_TLS_CA_FILE"], ca, err)
	}
	u, err := url.Parse(s["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	if pw, _ := u.User.Password(); u.Host != "patchman-db.svc:5432" || u.Path != "/patchman" || u.User.Username() != "listener" || pw != "db p@ss/word" ||
		u.Query().Get("sslmode") != "verify-full" {
		t.Errorf("DATABASE_URL %s", s["DATABASE_URL"])
	}
	if ca, err := os.ReadFile(u.Query().Get("sslrootcert")); err != nil || !strings.Contains(string(ca), "MIIBrds") {
		t.Errorf("sslrootcert: %q %v", ca, err)
	}
}

// The environment wins over the file.
func TestTheEnvironmentWins(t *testing.T) {
	env := map[string]string{"KAFKA_TOPIC": "mine"}
	look := clowder.Lookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		map[string]string{"KAFKA_TOPIC": "clowders", "KAFKA_BROKERS": "b:9092"})
	if v, _ := look("KAFKA_TOPIC"); v != "mine" {
		t.Errorf("KAFKA_TOPIC = %q, want the environment's", v)
	}
	if v, _ := look("KAFKA_BROKERS"); v != "b:9092" {
		t.Errorf("KAFKA_BROKERS = %q, want the file's", v)
	}
	if _, ok := look("NOTHING"); ok {
		t.Error("a setting neither gives was found")
	}
}
