package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// The example end to end against the in-process broker and PostgreSQL:
// payments from two topics land in the table once each, in batches; each
// good payment's balance is produced as a result; the bad one is in its
// topic's dead-letter topic; both topics are committed to their ends; and
// every attempt has its span.
func TestLedgerWritesBatchesProducesBalancesAndTraces(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		if os.Getenv("PATCHFLOW_REQUIRE_DB") == "1" {
			t.Fatal("DATABASE_URL is not set")
		}
		t.Skip("DATABASE_URL is not set")
	}
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DROP TABLE IF EXISTS ledger_payment`); err != nil {
		t.Fatal(err)
	}
	broker, err := embedded.Start(2, "orders", "refunds", "balances")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	want := map[string]int64{}
	good := 0
	for _, topic := range []string{"orders", "refunds"} {
		var kv []string
		for i := range 50 {
			account, cents := fmt.Sprint("acct-", i%7), int64(10*(i+1))
			v := strconv.FormatInt(cents, 10)
			if topic == "orders" && i == 13 {
				v = "ten dollars"
			} else {
				good++
				if topic == "refunds" {
					cents = -cents / 2
					v = strconv.FormatInt(-cents, 10)
				}
				want[account] += cents
			}
			kv = append(kv, account, v)
		}
		if err := broker.Produce(topic, kv...); err != nil {
			t.Fatal(err)
		}
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := consumer.Config{Brokers: broker.Addrs(), Topics: []string{"orders", "refunds"}, Group: "ledger-example", BatchLinger: 10 * time.Millisecond}
	go func() { done <- run(ctx, cfg, db, "balances", consumer.WithTracerProvider(tp)) }()
	committed := func(topic string) bool {
		p, err := offsets.Read(broker.Addrs(), topic, "ledger-example")
		return err == nil && len(p.Ends) == 2 && p.Committed[0] == p.Ends[0] && p.Committed[1] == p.Ends[1]
	}
	deadline := time.Now().Add(30 * time.Second)
	for !committed("orders") || !committed("refunds") {
		if time.Now().After(deadline) {
			t.Fatal("not committed to the ends within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = tp.Shutdown(context.Background())

	rows, err := db.Query(`SELECT account, sum(cents)::bigint, count(*) FROM ledger_payment GROUP BY account`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got, n := map[string]int64{}, 0
	for rows.Next() {
		var a string
		var sum, count int64
		if err := rows.Scan(&a, &sum, &count); err != nil {
			t.Fatal(err)
		}
		got[a], n = sum, n+int(count)
	}
	if n != good || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the table holds %d payments, balances %v; want %d, %v", n, got, good, want)
	}
	ends, err := offsets.Read(broker.Addrs(), "balances", "ledger-example")
	if err != nil {
		t.Fatal(err)
	}
	if results := ends.Ends[0] + ends.Ends[1]; results != int64(good) {
		t.Errorf("%d balances produced, want one per good payment, %d", results, good)
	}
	dlq := readOne(t, broker.Addrs(), "orders.dlq")
	if string(dlq.Key) != "acct-6" {
		t.Errorf("the dead letter's key is %q, want acct-6's bad payment", dlq.Key)
	}
	attempts := 0
	for _, s := range spans.Ended() {
		if s.Name() == "process orders" || s.Name() == "process refunds" {
			attempts++
		}
	}
	if attempts < 100 {
		t.Errorf("%d attempt spans for 100 records", attempts)
	}
}

// readOne reads the first record of topic's partitions.
func readOne(t *testing.T, brokers []string, topic string) *sarama.ConsumerMessage {
	t.Helper()
	c, err := sarama.NewConsumer(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	parts, err := c.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	found := make(chan *sarama.ConsumerMessage, 1)
	for _, p := range parts {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		go func() {
			for m := range pc.Messages() {
				select {
				case found <- m:
				default:
				}
			}
		}()
	}
	select {
	case m := <-found:
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing on %s", topic)
	}
	return nil
}
