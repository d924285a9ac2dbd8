package listener

import (
	"strings"
	"testing"
)

// With ACG_CONFIG, the listener's settings come from Clowder's file where
// the environment sets none; the environment wins.
func TestSettingsFromClowdersFile(t *testing.T) {
	env := map[string]string{"ACG_CONFIG": "../clowder/testdata/cdappconfig.json", "KAFKA_GROUP": "mine", "REMEDIATIONS_TOPIC": "my-remediations",
		"VMAAS_URL": "http://vmaas:8000"}
	lookup, err := clowderLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Parse(nil, lookup)
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Kafka
	if strings.Join(cfg.Brokers, ",") != "kafka-0.kafka.svc:9093,kafka-1.kafka.svc:9093" || k.Topic != "platform.inventory.events-env1" || k.Group != "mine" ||
		!k.Security.TLS || k.Security.SASLMechanism != "SCRAM-SHA-512" || k.Security.SASLUser != "patch-user" || k.Security.CAFile == "" {
		t.Errorf("kafka settings %+v (brokers %v)", k, cfg.Brokers)
	}
	fx := cfg.Domain.Effects
	if fx.RemediationsTopic != "my-remediations" || fx.NotificationsTopic != "platform.notifications.ingress-env1" || fx.PayloadStatusTopic != "platform.payload-status-env1" {
		t.Errorf("effects topics %+v", fx)
	}
	if !strings.HasPrefix(cfg.Domain.DatabaseURL, "postgres://listener:") || !strings.Contains(cfg.Domain.DatabaseURL, "@patchman-db.svc:5432/patchman?") {
		t.Errorf("database url: %s", cfg.Domain.DatabaseURL)
	}
	if cfg.HTTPAddr != ":9000" {
		t.Errorf("http addr %q", cfg.HTTPAddr)
	}
	// Without ACG_CONFIG nothing changes.
	plain, err := clowderLookup(func(k string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain("KAFKA_BROKERS"); ok {
		t.Error("a setting appeared without ACG_CONFIG")
	}
	// A file that is not there stops the start.
	if _, err := clowderLookup(func(k string) (string, bool) { return "/nonexistent/cdappconfig.json", k == "ACG_CONFIG" }); err == nil {
		t.Error("a missing ACG_CONFIG file was accepted")
	}
}
