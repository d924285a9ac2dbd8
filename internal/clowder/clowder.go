// Package clowder reads the configuration Clowder hands each pod of a
// ClowdApp: a JSON file named by ACG_CONFIG (the cdappconfig.json schema
// of github.com/RedHatInsights/clowder, controllers/cloud.redhat.com/
// config/schema.json), with the Kafka brokers (SASL, CA), the mapping of
// requested topic names to the names on the brokers, the database's
// credentials and the metrics port. Clowder's own Go loader is not served
// by the module proxy this project builds from; this reader takes only
// what the listener uses.
//
// Settings turns it into the listener's settings by their environment
// names; Lookup puts them under the environment, which wins.
//
// What it may import: the standard library.
package clowder

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Env is the variable naming the file.
const Env = "ACG_CONFIG"

// AppConfig is what the listener reads of cdappconfig.json.
type AppConfig struct {
	MetricsPort int             `json:"metricsPort"`
	MetricsPath string          `json:"metricsPath"`
	Kafka       *KafkaConfig    `json:"kafka"`
	Database    *DatabaseConfig `json:"database"`
}

// KafkaConfig is the brokers and the topics.
type KafkaConfig struct {
	Brokers []BrokerConfig `json:"brokers"`
	Topics  []TopicConfig  `json:"topics"`
}

// BrokerConfig is one broker.
type BrokerConfig struct {
	Hostname         string      `json:"hostname"`
	Port             *int        `json:"port"`
	CACert           string      `json:"cacert"`
	AuthType         string      `json:"authtype"`
	SASL             *SASLConfig `json:"sasl"`
	SecurityProtocol string      `json:"securityProtocol"`
}

// SASLConfig is a broker's SASL login.
type SASLConfig struct {
	Username         string `json:"username"`
	Password         string `json:"password"`
	SecurityProtocol string `json:"securityProtocol"` // deprecated: BrokerConfig's
	SASLMechanism    string `json:"saslMechanism"`
}

// TopicConfig maps the name the app requested to the topic's name on the brokers.
type TopicConfig struct {
	RequestedName string `json:"requestedName"`
	Name          string `json:"name"`
}

// DatabaseConfig is the database and the listener's credentials.
type DatabaseConfig struct {
	Name     string `json:"name"`
	Username string `json:"username"`
	Password string `json:"password"`
	Hostname string `json:"hostname"`
	Port     int    `json:"port"`
	RDSCA    string `json:"rdsCa"`
	SSLMode  string `json:"sslMode"`
}

// Load reads the file at path.
func Load(path string) (*AppConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Env, err)
	}
	var c AppConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s %s: not a cdappconfig.json: %w", Env, path, err)
	}
	return &c, nil
}

// defaultKafkaPort is a broker's port when the file gives none.
const defaultKafkaPort = 9092

// Settings returns the listener settings the file gives, by environment
// name. topics are the listener's topic settings and the names they request
// (their defaults): each becomes the name the brokers know it by. The CAs
// are written to files in dir (the listener reads CAs from files).
func (c *AppConfig) Settings(dir string, topics map[string]string) (map[string]string, error) {
	out := map[string]string{}
	if c.MetricsPort > 0 {
		out["LISTENER_HTTP_ADDR"] = ":" + strconv.Itoa(c.MetricsPort)
	}
	if k := c.Kafka; k != nil && len(k.Brokers) > 0 {
		addrs := make([]string, 0, len(k.Brokers))
		for _, b := range k.Brokers {
			if b.Hostname == "" {
				return nil, errors.New("kafka broker without a hostname")
			}
			port := defaultKafkaPort
			if b.Port != nil {
				port = *b.Port
			}
			addrs = append(addrs, net.JoinHostPort(b.Hostname, strconv.Itoa(port)))
		}
		out["KAFKA_BROKERS"] = strings.Join(addrs, ",")
		b := k.Brokers[0]
		protocol := b.SecurityProtocol
		if protocol == "" && b.SASL != nil {
			protocol = b.SASL.SecurityProtocol
		}
		switch strings.ToUpper(protocol) {
		case "SSL", "SASL_SSL":
			out["KAFKA_TLS"] = "true"
		case "", "PLAINTEXT", "SASL_PLAINTEXT":
		default:
			return nil, fmt.Errorf("kafka securityProtocol %q: want SSL, SASL_SSL or none", protocol)
		}
		if b.CACert != "" {
			path, err := writeFile(dir, "kafka-ca.pem", b.CACert)
			if err != nil {
				return nil, err
			}
			out["KAFKA_TLS_CA_FILE"] = path
		}
		if b.AuthType == "sasl" && b.SASL != nil {
			mech := b.SASL.SASLMechanism
			if mech == "" {
				mech = "SCRAM-SHA-512"
			}
			out["KAFKA_SASL_MECHANISM"], out["KAFKA_SASL_USER"], out["KAFKA_SASL_PASSWORD"] = mech, b.SASL.Username, b.SASL.Password
		}
		for setting, requested := range topics {
			for _, t := range k.Topics {
				if t.RequestedName == requested && t.Name != "" {
					out[setting] = t.Name
				}
			}
		}
	}
	if d := c.Database; d != nil && d.Hostname != "" {
		u := url.URL{Scheme: "postgres", User: url.UserPassword(d.Username, d.Password), Path: "/" + d.Name,
			Host: net.JoinHostPort(d.Hostname, strconv.Itoa(d.Port))}
		q := url.Values{}
		if d.SSLMode != "" {
			q.Set("sslmode", d.SSLMode)
		}
		if d.RDSCA != "" {
			path, err := writeFile(dir, "rds-ca.pem", d.RDSCA)
			if err != nil {
				return nil, err
			}
			q.Set("sslrootcert", path)
		}
		u.RawQuery = q.Encode()
		out["DATABASE_URL"] = u.String()
	}
	return out, nil
}

func writeFile(dir, name, content string) (string, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return "", fmt.Errorf("%s: write %s: %w", Env, name, err)
	}
	return path, nil
}

// Lookup returns a lookup that answers from env first and from settings
// when env has nothing: the environment wins over Clowder's file.
func Lookup(env func(string) (string, bool), settings map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if v, ok := env(k); ok {
			return v, true
		}
		v, ok := settings[k]
		return v, ok
	}
}
