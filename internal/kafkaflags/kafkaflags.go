// Package kafkaflags holds the Kafka settings the listener and its helpers
// share: the brokers' TLS and SASL, with the same names, defaults and checks
// everywhere, and the topics' default names, so a helper run with the
// listener's environment reaches the brokers and topics the listener uses.
// The password is a secret setting: never printed.
package kafkaflags

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/redact"
	"github.com/patchflow/patchflow/internal/settings"
)

// DefaultTopic is KAFKA_TOPIC's default: the inventory events.
const DefaultTopic = "platform.inventory.events"

// DeadLetterTopic is KAFKA_DLQ_TOPIC's default: the topic's name + ".dlq".
func DeadLetterTopic(topic string) string { return topic + ".dlq" }

// SASLMechanisms are the values KAFKA_SASL_MECHANISM accepts ("" for none).
var SASLMechanisms = []string{actors.SASLNone, actors.SASLPlain, actors.SASLScramSHA256, actors.SASLScramSHA512}

// BrokersSetting registers KAFKA_BROKERS into p, with usage, shown (in the
// effective configuration and in its errors) with anything before a
// broker's '@' masked: credentials that do not belong there (see Brokers).
func BrokersSetting(s *settings.Set, p *string, usage string) {
	s.String(p, "KAFKA_BROKERS", "kafka-brokers", "", usage, nil)
	s.ShowDefault("kafka-brokers", "(required)")
	s.ShowWith("kafka-brokers", RedactBrokers)
}

// RedactBrokers shows a KAFKA_BROKERS value with whatever comes before an
// '@' of a broker masked.
func RedactBrokers(v string) string {
	items := strings.Split(v, ",")
	for i, b := range items {
		if _, isURL := redact.Scheme(strings.TrimSpace(b)); isURL {
			items[i] = redact.URL(b)
		} else if at := strings.LastIndex(b, "@"); at >= 0 {
			items[i] = redact.Mask + b[at:]
		}
	}
	return strings.Join(items, ",")
}

// Security registers the TLS and SASL settings into sec.
func Security(s *settings.Set, sec *actors.KafkaSecurity) {
	s.Bool(&sec.TLS, "KAFKA_TLS", "kafka-tls", false, "connect to the brokers over TLS (1.2 or later)")
	s.String(&sec.CAFile, "KAFKA_TLS_CA_FILE", "kafka-tls-ca-file", "", "PEM file of the CAs that sign the brokers' certificates", nil)
	s.ShowDefault("kafka-tls-ca-file", "(system roots)")
	s.String(&sec.CertFile, "KAFKA_TLS_CERT_FILE", "kafka-tls-cert-file", "", "PEM client certificate, for brokers that require mutual TLS; needs `KAFKA_TLS_KEY_FILE`", nil)
	s.String(&sec.KeyFile, "KAFKA_TLS_KEY_FILE", "kafka-tls-key-file", "", "PEM key of the client certificate; needs `KAFKA_TLS_CERT_FILE`", nil)
	s.Bool(&sec.InsecureSkipVerify, "KAFKA_TLS_INSECURE_SKIP_VERIFY", "kafka-tls-insecure-skip-verify", false, "do not verify the brokers' certificates (testing only)")
	s.String(&sec.SASLMechanism, "KAFKA_SASL_MECHANISM", "kafka-sasl-mechanism", "", "SASL mechanism: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`; with `KAFKA_TLS` for SASL_SSL", func(v string) error {
		if !slices.Contains(SASLMechanisms, v) {
			return fmt.Errorf("must be one of %s", strings.Join(SASLMechanisms, ", "))
		}
		return nil
	})
	s.String(&sec.SASLUser, "KAFKA_SASL_USER", "kafka-sasl-user", "", "SASL user; required with a mechanism", nil)
	s.Secret(&sec.SASLPassword, "KAFKA_SASL_PASSWORD", "kafka-sasl-password", "SASL password; never logged, never shown on the status page")
}

// CheckSecurity reports a bad combination of the settings Security
// registered, naming the setting to change.
func CheckSecurity(s *settings.Set, sec actors.KafkaSecurity) error {
	if sec.SASLMechanism != "" && sec.SASLUser == "" {
		return s.Invalid("kafka-sasl-user", fmt.Errorf("required by KAFKA_SASL_MECHANISM=%s", sec.SASLMechanism))
	}
	if (sec.CertFile == "") != (sec.KeyFile == "") {
		return s.Invalid("kafka-tls-key-file", errors.New("a client certificate needs both KAFKA_TLS_CERT_FILE and KAFKA_TLS_KEY_FILE"))
	}
	return nil
}

// Brokers splits a comma-separated KAFKA_BROKERS value, each entry
// host:port, without a scheme or credentials (an error never shows such an
// entry: it may hold a password).
func Brokers(list string) ([]string, error) {
	var out []string
	for _, b := range strings.Split(list, ",") {
		b = strings.TrimSpace(b)
		if strings.Contains(b, "@") || strings.Contains(b, "://") {
			return nil, errors.New("a broker is host:port, without a scheme or credentials (KAFKA_SASL_USER and KAFKA_SASL_PASSWORD log in)")
		}
		if !strings.Contains(b, ":") {
			return nil, fmt.Errorf("%q is not host:port", b)
		}
		out = append(out, b)
	}
	return out, nil
}
