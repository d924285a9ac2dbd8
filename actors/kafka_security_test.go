package actors_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

func writeCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestKafkaSecurityConfiguresSarama(t *testing.T) {
	k := actors.KafkaSettings{Version: sarama.V3_6_0_0, Security: actors.KafkaSecurity{
		TLS: true, CAFile: writeCA(t), SASLMechanism: actors.SASLScramSHA512, SASLUser: "u", SASLPassword: "p"}}
	for name, build := range map[string]func() (*sarama.Config, error){
		"consumer": func() (*sarama.Config, error) { return actors.NewConsumerConfig(k, actors.DefaultSettings()) },
		"producer": func() (*sarama.Config, error) { return actors.NewProducerConfig(k) },
	} {
		cfg, err := build()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !cfg.Net.TLS.Enable || cfg.Net.TLS.Config.RootCAs == nil || !cfg.Net.SASL.Enable ||
			cfg.Net.SASL.Mechanism != sarama.SASLTypeSCRAMSHA512 || cfg.Net.SASL.User != "u" {
			t.Fatalf("%s: security not applied", name)
		}
		c := cfg.Net.SASL.SCRAMClientGeneratorFunc()
		if err := c.Begin("u", "p", ""); err != nil {
			t.Fatal(err)
		}
		if first, err := c.Step(""); err != nil || first == "" || c.Done() {
			t.Fatalf("%s: SCRAM client first message %q, %v", name, first, err)
		}
	}
	bad := []actors.KafkaSecurity{
		{TLS: true, CAFile: "/nonexistent/ca.pem"},
		{TLS: true, CertFile: "/etc/c.pem"},
		{SASLMechanism: "GSSAPI", SASLUser: "u"},
		{SASLMechanism: actors.SASLPlain},
	}
	for _, s := range bad {
		if _, err := actors.NewProducerConfig(actors.KafkaSettings{Version: sarama.V3_6_0_0, Security: s}); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
}

// The SASL password never shows when the settings are printed or logged,
// whole or inside KafkaSettings.
func TestKafkaSecurityNeverShowsThePassword(t *testing.T) {
	const password = "Gt5pKsXa"
	k := actors.KafkaSettings{Topic: "t", Security: actors.KafkaSecurity{SASLMechanism: actors.SASLPlain, SASLUser: "patch", SASLPassword: password}}
	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	logger.Info("settings", "kafka", k, "security", k.Security)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("settings", "kafka", k, "security", k.Security)
	js, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fmt.Sprint(k), fmt.Sprintf("%+v", k), fmt.Sprintf("%#v", k), fmt.Sprint(k.Security), fmt.Sprintf("%#v", k.Security), logged.String(), string(js)} {
		if strings.Contains(out, password) || !strings.Contains(out, "patch") {
			t.Errorf("shows the password, or not the user: %s", out)
		}
	}
	if k.Security.SASLPassword != password {
		t.Fatal("String changed the password itself")
	}
}
