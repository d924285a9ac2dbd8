package listener

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/clowder"
	"github.com/patchflow/patchflow/internal/kafkaflags"
	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/internal/telemetry"
	"github.com/patchflow/patchflow/internal/version"
	"github.com/patchflow/patchflow/inventory"
)

// Main runs the listener process: settings from the environment and args,
// the domain handler, the pipeline until the first SIGTERM or SIGINT, then
// the drain. It returns the process's exit code: 0 after a clean drain (or
// -h), settings.ExitUsage for a bad setting, 1 when it cannot start. A
// second signal during the drain exits at once with 128 + its number.
// exts are what the build adds beyond the product (none in cmd/listener).
func Main(args []string, stdout, stderr io.Writer, exts ...Extension) int {
	if len(args) == 1 && (args[0] == "-version" || args[0] == "--version") {
		fmt.Fprintln(stdout, version.Get())
		return 0
	}
	lookup, err := clowderLookup(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(stderr, "listener:", err)
		return settings.ExitUsage
	}
	cfg, set, err := Parse(args, lookup, exts...)
	if errors.Is(err, settings.ErrHelp) {
		fmt.Fprintln(stdout, "listener: consume inventory events and evaluate them, committing only past finished records.\n\nSettings (flags win over environment variables):")
		set.PrintUsage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "listener:", err)
		return settings.ExitUsage
	}
	logger := NewLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	v := version.Get()
	logger.Info("configuration", append([]any{"version", v.Version, "revision", v.Revision}, set.Effective()...)...)
	if limit, source := applyMemoryLimit(int64(cfg.MemoryLimit)); limit > 0 {
		logger.Info("Go memory limit set from the container's", "limit_mib", limit>>20, "from", source)
	} else if source == "" {
		logger.Warn("no memory limit known (no GOMEMLIMIT, LISTENER_MEMORY_LIMIT or cgroup limit): the garbage collector will not work harder as memory runs short")
	}

	ctx, stop := ShutdownOnSignals(logger, os.Exit)
	defer stop()
	metrics := telemetry.New()
	metrics.KnowReasons(inventory.SkipReasons(), inventory.ValidationReasons())
	domain, err := NewDomain(ctx, cfg, logger)
	if err != nil {
		logger.Error("listener failed to start", "error", err)
		return 1
	}
	defer domain.Close()
	var relayOnce sync.Once // one relay per process, whatever the members
	hooks := Hooks{Metrics: metrics, Ping: domain.Ping, PingVMaaS: domain.PingVMaaS, Settings: settingsOf(set.Effective()),
		// The brokers are known once the consumer runs (an embedded one
		// starts in Run); the relay stops in domain.Close, after the drain.
		Started: func(*actors.Bridge) {
			relayOnce.Do(func() {
				k := cfg.Kafka
				k.Brokers = cfg.Brokers
				if err := metrics.AttachRelay(domain.Relay); err != nil {
					logger.Warn("outbox metrics", "error", err)
				}
				go domain.StartEffectsRetrying(ctx, k, logger, nil)
			})
		}}
	if err := Run(ctx, cfg, domain.Handler, logger, hooks); err != nil {
		logger.Error("listener failed", "error", err)
		return 1
	}
	return 0
}

// settingsOf turns the effective configuration's key/value pairs into rows.
func settingsOf(kv []any) []telemetry.Setting {
	out := make([]telemetry.Setting, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, telemetry.Setting{Name: fmt.Sprint(kv[i]), Value: fmt.Sprint(kv[i+1])})
	}
	return out
}

// clowderLookup is env, over the settings of Clowder's file when ACG_CONFIG
// names one (internal/clowder): the environment wins. The file's CAs are
// written to a directory of the process's own.
func clowderLookup(env func(string) (string, bool)) (func(string) (string, bool), error) {
	path, ok := env(clowder.Env)
	if !ok || path == "" {
		return env, nil
	}
	c, err := clowder.Load(path)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "patchflow-clowder-")
	if err != nil {
		return nil, err
	}
	s, err := c.Settings(dir, map[string]string{"KAFKA_TOPIC": kafkaflags.DefaultTopic, "REMEDIATIONS_TOPIC": DefaultRemediationsTopic,
		"NOTIFICATIONS_TOPIC": DefaultNotificationsTopic, "PAYLOAD_TRACKER_TOPIC": DefaultPayloadStatusTopic})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", clowder.Env, path, err)
	}
	return clowder.Lookup(env, s), nil
}
