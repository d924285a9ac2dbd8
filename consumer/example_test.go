package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
)

// A handler of your own, run against an in-process broker: three records
// handled, one dead-lettered, everything committed when ctx ends.
func Example() {
	broker, _ := embedded.Start(1, "orders") // a real cluster's addresses in production
	defer broker.Close()
	_ = broker.Produce("orders", "a", "1", "b", "2", "a", "3", "c", "oops")

	handler := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		if string(r.Value) == "oops" {
			return consumer.Permanent(errors.New("not a number")) // to orders.dlq
		}
		return nil // done: committed once every record before it is done too
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "orders", Group: "billing"}, handler)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // stop once all four are finished; a service runs until SIGTERM
		for s := c.Stats(); s.Succeeded+s.DeadLettered < 4; s = c.Stats() {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	err = c.Run(ctx) // drains and commits before it returns
	s := c.Stats()
	fmt.Println(err, s.Succeeded, s.DeadLettered)
	// Output: <nil> 3 1
}

// The three outcomes a handler chooses between, besides success.
func ExampleHandlerFunc() {
	_ = consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		switch {
		case len(r.Value) == 0:
			return consumer.Skip("empty", "nothing to do") // committed, counted, never dead-lettered
		case r.Value[0] != '{':
			return consumer.Permanent(errors.New("not JSON")) // dead-lettered at once
		}
		resp, err := http.Post("http://inventory/hosts", "application/json", nil)
		if err != nil {
			// Retried: without limit while "inventory" fails for every
			// record, up to Config.MaxAttempts while it serves the others.
			return consumer.FailedIn("inventory", consumer.Transient(err))
		}
		return resp.Body.Close()
	})
}

// A handler reports its calls so the consumer can tell an outage of a
// dependency from a record's own trouble; the calls also become the metric
// patchflow_dependency_duration_seconds{dependency, result}.
func ExampleDependencyReporter() {
	var report func(context.Context, string, time.Duration, error)
	call := func(ctx context.Context) error { return nil } // your client's call
	h := struct {
		consumer.HandlerFunc
		reporterFunc
	}{
		HandlerFunc: func(ctx context.Context, r *consumer.Record) error {
			start := time.Now()
			err := call(ctx)
			report(ctx, "inventory", time.Since(start), err)
			return consumer.FailedIn("inventory", err)
		},
		reporterFunc: func(f func(context.Context, string, time.Duration, error)) { report = f },
	}
	_, _ = consumer.New(consumer.Config{Brokers: []string{"kafka:9092"}, Topic: "events", Group: "g"}, h)
}

// reporterFunc adapts a function to consumer.DependencyReporter.
type reporterFunc func(func(context.Context, string, time.Duration, error))

func (f reporterFunc) ReportDependenciesTo(report func(context.Context, string, time.Duration, error)) {
	f(report)
}

// Enumerated settings have a type and a constant per value; New refuses a
// Config it cannot run, naming every field that is wrong.
func ExampleConfig() {
	cfg := consumer.Config{
		Brokers: []string{"kafka-1:9092", "kafka-2:9092"}, Topic: "orders", Group: "billing",
		Ordering:             consumer.OrderingKey,
		Concurrency:          consumer.ConcurrencyAdaptive,
		InFlightPerPartition: 128, InFlightTotal: 2048,
	}
	if _, err := consumer.New(cfg, consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil })); err != nil {
		fmt.Println(err)
	}
	cfg.InFlightPerPartition, cfg.Ordering = 4096, "by-key"
	_, err := consumer.New(cfg, consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil }))
	fmt.Println(err)
	// Output:
	// consumer.Config.InFlightPerPartition: 4096 is above InFlightTotal (2048): a partition cannot run more than the process
	// consumer.Config.Ordering: unknown ordering "by-key" (want key, partition or unordered)
}

// A handler that implements DeadLetterObserver hears of each record given
// up on before its dead letter is written (to tell the record's sender, say).
func ExampleDeadLetterObserver() {
	broker, _ := embedded.Start(1, "orders")
	defer broker.Close()
	_ = broker.Produce("orders", "a", "1", "b", "oops")

	h := &observed{}
	c, _ := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "orders", Group: "billing"}, h)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for s := c.Stats(); s.Succeeded+s.DeadLettered < 2; s = c.Stats() {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	_ = c.Run(ctx)
	// Output: given up on offset 1 (key b): not a number
}

type observed struct{}

func (*observed) Handle(_ context.Context, r *consumer.Record) error {
	if string(r.Value) == "oops" {
		return consumer.Permanent(errors.New("not a number"))
	}
	return nil
}

func (*observed) DeadLettered(_ context.Context, r *consumer.Record, failure string) error {
	fmt.Printf("given up on offset %d (key %s): %s\n", r.Offset, r.Key, failure)
	return nil
}
