package actors

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// SASL mechanisms the listener speaks.
const (
	SASLNone        = ""
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// KafkaSecurity is how the listener authenticates to the brokers and
// protects the connection.
type KafkaSecurity struct {
	TLS                bool
	CAFile             string // PEM; empty: the system roots
	CertFile, KeyFile  string // PEM client certificate for mutual TLS; both or neither
	InsecureSkipVerify bool
	SASLMechanism      string // "", PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	SASLUser           string
	// SASLPassword is never shown: String, GoString and LogValue mask it
	// (and so a KafkaSettings printed or logged whole), JSON leaves it out.
	SASLPassword string `json:"-"`
}

// String shows the settings with the SASL password masked.
func (s KafkaSecurity) String() string {
	if s.SASLPassword != "" {
		s.SASLPassword = "xxxxx"
	}
	type plain KafkaSecurity // without the methods, so that %+v does not recurse
	return fmt.Sprintf("%+v", plain(s))
}

// GoString is String, for %#v.
func (s KafkaSecurity) GoString() string { return s.String() }

// LogValue is String, for log/slog.
func (s KafkaSecurity) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Apply configures cfg's network security (TLS, SASL) as the listener's
// consumers and dead-letter producer have it; other clients of the same
// brokers (cmd/dlq) use it too.
func (s KafkaSecurity) Apply(cfg *sarama.Config) error {
	if s.TLS {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.InsecureSkipVerify} //nolint:gosec // an explicit operator choice
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return fmt.Errorf("kafka TLS CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return fmt.Errorf("kafka TLS CA file %s holds no PEM certificate", s.CAFile)
			}
			tc.RootCAs = pool
		}
		if (s.CertFile == "") != (s.KeyFile == "") {
			return fmt.Errorf("kafka TLS: a client certificate needs both a certificate and a key file")
		}
		if s.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
			if err != nil {
				return fmt.Errorf("kafka TLS client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = tc
	}
	switch s.SASLMechanism {
	case SASLNone:
		return nil
	case SASLPlain:
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case SASLScramSHA256:
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA256} }
	case SASLScramSHA512:
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512} }
	default:
		return fmt.Errorf("unknown SASL mechanism %q", s.SASLMechanism)
	}
	if s.SASLUser == "" {
		return fmt.Errorf("SASL %s needs a user", s.SASLMechanism)
	}
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.User = s.SASLUser
	cfg.Net.SASL.Password = s.SASLPassword
	cfg.Net.SASL.Handshake = true
	return nil
}

// scramClient adapts xdg-go/scram to sarama's SCRAMClient.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }
