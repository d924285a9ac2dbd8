// Package e2e is the fault-injection suite run against a real Kafka broker,
// a real PostgreSQL and listener processes: crash loops, group churn, a
// broker restart, a database outage, VMaaS trouble, poison messages, SASL,
// hosts held hostage by a VMaaS that never answers for them, and a revoke
// while the members are starved by a database outage. Each scenario starts
// from a clean topic and database and is judged by an independent check: the
// checker's SQL against loadgen's expected state, the dead-letter topic
// (exactly the broken messages, by reason, and the hostages' records with
// their history), the skip counts the listeners log as they stop, the
// group's committed offsets read from the broker, and, where a scenario
// needs them, the listeners' own logs.
package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	_ "github.com/lib/pq" // the "postgres" driver
)

// Env is what the suite runs against.
type Env struct {
	Brokers  []string
	AdminURL string // a PostgreSQL URL able to create databases
	Bin      string // directory with listener
	CI       string // directory with the kafka and postgres scripts
	KafkaDir string // the broker's directory (.ci/kafka), for restarts
	PGDir    string // the database server's directory (.ci/postgres), for outages
	Work     string // where logs go
	// SASLBrokers is the broker's SASL listener, with its test user.
	SASLBrokers            []string
	SASLUser, SASLPassword string
	// Browser is a Chromium binary for the status page check; empty skips it.
	Browser string
	// Screenshot is where the status page screenshot goes; empty: none.
	Screenshot string
	// ListenerEnv is added to every listener's environment after the
	// scenario's own (NAME=value each).
	ListenerEnv []string
	// Cluster is the three-node cluster and its fault proxies, for the
	// cluster scenarios; nil: they are skipped. Brokers are its tools
	// listeners while they run.
	Cluster *Cluster
	// Image is the listener's image (make image), for the image scenario;
	// empty: it is skipped. ContainerEngine runs it (podman or docker).
	Image, ContainerEngine string
}

// createDatabase makes an empty database and returns its URL.
func (e *Env) createDatabase(ctx context.Context, name string) (string, error) {
	db, err := sql.Open("postgres", e.AdminURL)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil { // generated name
		return "", err
	}
	if _, err := db.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		return "", err
	}
	u, err := url.Parse(e.AdminURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

func kv(k, v string) string { return k + "=" + v }

func join(s []string) string { return strings.Join(s, ",") }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
