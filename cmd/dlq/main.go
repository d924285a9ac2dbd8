// Command dlq prints the listener's dead-letter topic, one line per record:
// when it was given up, the original topic/partition/offset, key, reason,
// attempts and the last error (-json: one JSON object per record, with the
// failure history; -value: the original value too). It reads from the
// oldest record (-offset for another), stops at the end (-follow to keep
// reading), and takes the listener's Kafka settings (KAFKA_BROKERS,
// KAFKA_TOPIC, KAFKA_DLQ_TOPIC, TLS and SASL). dlq -h lists them.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/patchflow/patchflow/internal/dlq"
	"github.com/patchflow/patchflow/internal/settings"
)

func main() {
	cfg, set, err := dlq.Parse(os.Args[1:], os.LookupEnv)
	if errors.Is(err, settings.ErrHelp) {
		set.PrintUsage(os.Stdout)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dlq:", err)
		os.Exit(settings.ExitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	out := bufio.NewWriter(os.Stdout)
	var w io.Writer = out
	if cfg.Follow {
		w = os.Stdout // each line as it comes: one write per line
	}
	sum, err := dlq.Run(ctx, cfg, w)
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dlq:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "dlq: %s: %d dead letters, %d records that are not envelopes\n", cfg.Topic, sum.Letters, sum.NotEnvelope)
}
