// Command listener consumes inventory events from Kafka and handles each one
// through the actor pipeline, committing offsets only past finished records.
// Every setting is an environment variable and a flag; run with -h for the
// list, or see docs/configuration.md. SIGTERM or SIGINT drains and exits 0;
// a second one during the drain exits at once with 128 + its number.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/patchflow/patchflow/cmd/internal/listener"
	"github.com/patchflow/patchflow/cmd/internal/settings"
	"github.com/patchflow/patchflow/cmd/internal/telemetry"
)

func main() {
	cfg, set, err := listener.Parse(os.Args[1:], os.LookupEnv)
	if errors.Is(err, settings.ErrHelp) {
		fmt.Fprintln(os.Stdout, "listener: consume inventory events and evaluate them, committing only past finished records.\n\nSettings (flags win over environment variables):")
		set.PrintUsage(os.Stdout)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "listener:", err)
		os.Exit(settings.ExitUsage)
	}
	logger := listener.NewLogger(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	logger.Info("configuration", set.Effective()...)

	// The first SIGTERM or SIGINT drains and exits 0; a second exits at once.
	ctx, stop := listener.ShutdownOnSignals(logger, os.Exit)
	defer stop()
	metrics := telemetry.New()
	domain, err := listener.NewDomain(ctx, cfg, logger, metrics)
	if err != nil {
		logger.Error("listener failed to start", "error", err)
		os.Exit(1)
	}
	defer domain.Close()
	if err := listener.Run(ctx, cfg, domain.Handler, logger, listener.Hooks{Metrics: metrics, Ping: domain.Ping, Settings: settingsOf(set.Effective())}); err != nil {
		logger.Error("listener failed", "error", err)
		domain.Close()
		os.Exit(1)
	}
}

// settingsOf turns the effective configuration's key/value pairs into rows.
func settingsOf(kv []any) []telemetry.Setting {
	out := make([]telemetry.Setting, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, telemetry.Setting{Name: fmt.Sprint(kv[i]), Value: fmt.Sprint(kv[i+1])})
	}
	return out
}
