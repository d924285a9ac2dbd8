package transactions

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/patchflow/patchflow/consumer"
)

// runLibrary runs the loop as the consumer library's transactional mode
// (consumer.CommitTransactional; with o.Periodic its periodic one): a handler that waits o.Latency and
// produces one result per input record, its value "partition/offset",
// under the record's key (16 keys per input partition),
// until the group has committed every input partition to its end. It
// counts a partition stuck when nothing was committed for o.Stall.
func runLibrary(ctx context.Context, o Options, logf func(string, ...any)) Report {
	var rep Report
	h := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		select {
		case <-time.After(o.Latency):
		case <-ctx.Done():
			return ctx.Err()
		}
		r.Produce(consumer.Message{Topic: o.Out, Key: r.Key,
			Value: []byte(fmt.Sprintf("%d/%d", r.Partition, r.Offset))})
		return nil
	})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.Log != nil {
		logger = slog.New(slog.NewTextHandler(o.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	mode := consumer.CommitTransactional
	if o.Periodic {
		mode = consumer.CommitPeriodic
	}
	c, err := consumer.New(consumer.Config{Brokers: o.Brokers, Topic: o.In, Group: o.Group, KafkaVersion: "3.6.0",
		CommitMode: mode, InFlightTotal: o.InFlight, InFlightPerPartition: max(o.InFlight/int(o.Partitions), 1),
		Concurrency: consumer.ConcurrencyFixed}, h, consumer.WithLogger(logger))
	if err != nil {
		rep.Stuck = append(rep.Stuck, err.Error())
		return rep
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			rep.Stuck = append(rep.Stuck, "Run: "+err.Error())
		}
	}()
	admin, err := newClient(o.Brokers, "")
	if err != nil {
		rep.Stuck = append(rep.Stuck, err.Error())
		return rep
	}
	defer admin.Close()
	at := make([]int64, o.Partitions)
	moved := make([]time.Time, o.Partitions)
	for p := range moved {
		moved[p] = time.Now()
	}
	for {
		done := true
		for p := int32(0); p < o.Partitions; p++ {
			off, err := committed(admin, o, p)
			if err == nil && off > at[p] {
				rep.LongestStall = max(rep.LongestStall, time.Since(moved[p]))
				at[p], moved[p] = off, time.Now()
			}
			if at[p] < o.PerPartition {
				done = false
				if since := time.Since(moved[p]); since > o.Stall {
					rep.Stuck = append(rep.Stuck, fmt.Sprintf("partition %d: nothing committed for %.0f s at offset %d", p, since.Seconds(), at[p]))
					return rep
				}
			}
		}
		if done {
			s := c.Stats()
			logf("library: every partition committed to its end; %d records finished, %d retried", s.Succeeded, s.Retried)
			return rep
		}
		select {
		case <-ctx.Done():
			rep.Stuck = append(rep.Stuck, "stopped")
			return rep
		case <-time.After(250 * time.Millisecond):
		}
	}
}
