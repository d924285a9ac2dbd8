// Command loadgen produces realistic inventory events (about 100 KB each,
// keyed by host id) with a chosen share of bad messages and of messages the
// listener skips, prints what it sent, and can write the final state every
// host must end in.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

func main() {
	cfg, set, err := loadgen.Parse(os.Args[1:], os.LookupEnv)
	if errors.Is(err, settings.ErrHelp) {
		set.PrintUsage(os.Stdout)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(settings.ExitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	created, err := loadgen.CheckTopic(cfg.Produce.Brokers, cfg.Produce.Version, cfg.Produce.Topic, cfg.CreateTopic, cfg.Partitions)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
	if created {
		fmt.Fprintf(os.Stderr, "loadgen: created topic %s with %d partitions\n", cfg.Produce.Topic, cfg.Partitions)
	}
	ds := platform.NewDataset(cfg.Options.Seed, platform.DefaultSize())
	plan := loadgen.NewPlan(cfg.Options)
	cfg.Produce.Progress = os.Stderr
	res, err := loadgen.Produce(ctx, ds, cfg.Options, plan, cfg.Produce)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
	fmt.Print(loadgen.Summary(plan, res))
	if cfg.Expected != "" {
		if err := loadgen.WriteExpected(cfg.Expected, plan); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
		fmt.Printf("expected final state of %d hosts written to %s\n", len(plan.Expected), cfg.Expected)
	}
}
