// Command demo runs the listener end to end on embedded defaults (an
// in-process broker, the simulated handler) and prints live progress and a
// summary. `make demo` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/patchflow/patchflow/cmd/internal/demo"
	"github.com/patchflow/patchflow/cmd/internal/listener"
	"github.com/patchflow/patchflow/cmd/internal/settings"
)

func main() {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	records := fs.Int("records", 20000, "records to produce")
	hosts := fs.Int("hosts", 5000, "distinct hosts (Kafka keys)")
	poison := fs.Float64("poison-rate", 0.005, "share of malformed records (dead-lettered)")
	_ = fs.Parse(os.Args[1:])

	// The listener's own settings come from the environment, with demo defaults.
	lookup := func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, true
		}
		switch k {
		case "KAFKA_BROKERS":
			return listener.EmbeddedBrokers, true
		case "LISTENER_SIMULATED_LATENCY":
			return "80ms", true
		case "LISTENER_SIMULATED_JITTER":
			return "40ms", true
		case "LISTENER_PROGRESS_INTERVAL":
			return "0", true
		case "LOG_LEVEL":
			return "error", true // the demo dead-letters on purpose; skip the warning per record
		}
		return "", false
	}
	cfg, _, err := listener.Parse(nil, lookup)
	if err != nil && !errors.Is(err, settings.ErrHelp) {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(settings.ExitUsage)
	}
	if !cfg.Embedded {
		fmt.Fprintln(os.Stderr, "demo: runs on the embedded broker only; unset KAFKA_BROKERS")
		os.Exit(settings.ExitUsage)
	}
	logger := listener.NewLogger(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	start := time.Now()
	if err := demo.Run(ctx, cfg, demo.Options{Records: *records, Hosts: *hosts, PoisonRate: *poison}, os.Stdout, logger); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
	fmt.Printf("  demo total        %v\n", time.Since(start).Round(time.Millisecond))
}
