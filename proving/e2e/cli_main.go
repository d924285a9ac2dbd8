package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/patchflow/patchflow/internal/settings"
)

// Main is cmd/e2e's whole program: it parses os.Args and exits.
func Main() {
	var env Env
	var brokers, only string
	s := settings.New("e2e")
	s.String(&brokers, "E2E_BROKERS", "brokers", "", "the real broker's bootstrap address", nil)
	s.SecretURL(&env.AdminURL, "E2E_DATABASE_URL", "database-url", "a PostgreSQL URL that may create databases", nil)
	s.String(&env.Bin, "E2E_BIN", "bin", "bin", "directory holding the listener binary", nil)
	s.String(&env.CI, "E2E_CI", "ci", ".ci", "directory holding the kafka and postgres scripts", nil)
	s.String(&env.KafkaDir, "E2E_KAFKA_DIR", "kafka-dir", "", "the broker's directory, for the restart scenario", nil)
	s.String(&env.PGDir, "E2E_PG_DIR", "pg-dir", "", "the database server's directory, for the outage scenario", nil)
	s.String(&env.Work, "E2E_WORK", "work", os.TempDir(), "where listener logs go", nil)
	var saslBrokers string
	s.String(&saslBrokers, "E2E_SASL_BROKERS", "sasl-brokers", "", "the broker's SASL listener (empty: the SASL scenario is skipped)", nil)
	s.String(&env.SASLUser, "E2E_SASL_USER", "sasl-user", "patchflow", "SASL test user", nil)
	s.Secret(&env.SASLPassword, "E2E_SASL_PASSWORD", "sasl-password", "SASL test password")
	s.String(&env.Browser, "E2E_BROWSER", "browser", "", "Chromium binary for the status page check (empty: skipped)", nil)
	s.String(&env.Screenshot, "E2E_SCREENSHOT", "screenshot", "", "save the status page screenshot here", nil)
	s.String(&env.Image, "E2E_IMAGE", "image", "", "the listener's image, for the image scenario (empty: skipped)", nil)
	s.String(&env.ContainerEngine, "E2E_CONTAINER_ENGINE", "container-engine", "podman", "the engine that runs the image: podman or docker", nil)
	s.String(&only, "E2E_SCENARIOS", "scenarios", "", "comma-separated scenario names (default: all)", nil)
	var clusterDir string
	s.String(&clusterDir, "E2E_CLUSTER_DIR", "cluster-dir", "", "the three-node cluster's directory (.ci/kafka-cluster start), for the cluster scenarios (empty: skipped)", nil)
	var nemesisSeed int
	var nemesisFor time.Duration
	s.Int(&nemesisSeed, "NEMESIS_SEED", "nemesis-seed", 0, 0, "the nemesis's seed (0: a new one, printed first)")
	s.Duration(&nemesisFor, "NEMESIS_DURATION", "nemesis-duration", 0, 0, "how long the nemesis runs its faults (0: no nemesis; it needs E2E_CLUSTER_DIR)")
	var listenerEnv string
	s.String(&listenerEnv, "E2E_LISTENER_ENV", "listener-env", "", "comma-separated NAME=value settings added to every listener's environment, after the scenario's (to measure the suite with a setting changed)", checkListenerEnv)
	err := s.Parse(os.Args[1:], os.LookupEnv)
	if errors.Is(err, settings.ErrHelp) {
		s.PrintUsage(os.Stdout)
		return
	}
	if err == nil && (brokers == "" || env.AdminURL == "") {
		err = errors.New("E2E_BROKERS and E2E_DATABASE_URL are required (run `make e2e`)")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(settings.ExitUsage)
	}
	env.Brokers = strings.Split(brokers, ",")
	if saslBrokers != "" {
		env.SASLBrokers = strings.Split(saslBrokers, ",")
	}
	if listenerEnv != "" {
		env.ListenerEnv = strings.Split(listenerEnv, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	scenarios := Scenarios()
	var cluster *Cluster
	if clusterDir != "" {
		if cluster, err = OpenCluster(clusterDir, env.AdminURL); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: the cluster:", err)
			os.Exit(1)
		}
		defer cluster.Close()
	}
	scenarios = append(scenarios, ClusterScenarios()...)
	if nemesisFor > 0 {
		seed := uint64(nemesisSeed)
		if seed == 0 {
			seed = uint64(time.Now().UnixNano()%1_000_000_000) + 1
		}
		fmt.Printf("nemesis: NEMESIS_SEED=%d NEMESIS_DURATION=%v\n", seed, nemesisFor)
		scenarios = append(scenarios, NemesisScenario(seed, nemesisFor))
	}
	failed := 0
	for _, sc := range scenarios {
		if only != "" && !slices.Contains(strings.Split(only, ","), sc.Name) {
			continue
		}
		env := env
		if sc.Cluster {
			if cluster == nil {
				fmt.Printf("%-14s skipped: no cluster (E2E_CLUSTER_DIR)\n", sc.Name)
				continue
			}
			env.Brokers, env.KafkaDir, env.Cluster = cluster.Tools, "", cluster
		}
		if sc.Container && env.Image == "" {
			fmt.Printf("%-14s skipped: no image (E2E_IMAGE; make e2e builds one)\n", sc.Name)
			continue
		}
		if sc.SASL != "" && len(env.SASLBrokers) == 0 {
			fmt.Printf("%-14s skipped: no SASL listener (E2E_SASL_BROKERS)\n", sc.Name)
			continue
		}
		fmt.Printf("running %s (%d events, %d listeners, %d faults)...\n", sc.Name, sc.Events, sc.Listeners, len(sc.Faults))
		line, err := Run(ctx, &env, sc)
		if err != nil {
			fmt.Printf("%-14s ERROR: %v\n", sc.Name, err)
			failed++
			continue
		}
		if !line.OK() {
			failed++
		}
		fmt.Println(line)
	}
	fmt.Printf("e2e: logs in %s\n", env.Work)
	if failed > 0 {
		fmt.Printf("e2e: %d scenario(s) failed\n", failed)
		os.Exit(1)
	}
}

func checkListenerEnv(v string) error {
	if v == "" {
		return nil
	}
	for _, kv := range strings.Split(v, ",") {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return fmt.Errorf("%q is not NAME=value", kv)
		}
	}
	return nil
}
