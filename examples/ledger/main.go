// Command ledger is patchflow's consumer with a batch handler of its own:
// it reads payments from two topics (KAFKA_TOPICS, "orders,refunds" by
// default), writes them to PostgreSQL in batches (one multi-row INSERT in
// one transaction per batch), produces each account's new balance to
// RESULTS_TOPIC ("balances") before a record counts as finished, and, with
// TRACES=stdout, prints an OpenTelemetry span per attempt. Run it:
//
//	KAFKA_BROKERS=127.0.0.1:9092 DATABASE_URL=postgres://... TRACES=stdout go run ./examples/ledger
//
// A record's key is the account, its value the amount in cents ("250",
// "-75"). SIGTERM or Ctrl-C drains what is in flight, commits and exits.
package main

import (
	"context"
	"database/sql"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	_ "github.com/lib/pq"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/patchflow/patchflow/consumer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	topics := strings.Split(envOr("KAFKA_TOPICS", "orders,refunds"), ",")
	cfg := consumer.Config{Brokers: strings.Split(os.Getenv("KAFKA_BROKERS"), ","), Topics: topics, Group: "ledger-example"}
	opts := []consumer.Option{consumer.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)))}
	if os.Getenv("TRACES") == "stdout" {
		exp, err := stdouttrace.New()
		if err != nil {
			log.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
		defer func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) }()
		opts = append(opts, consumer.WithTracerProvider(tp))
	}
	db, err := sql.Open("postgres", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := run(ctx, cfg, db, envOr("RESULTS_TOPIC", "balances"), opts...); err != nil {
		log.Fatal(err)
	}
}

// run is the whole of the glue: the table, a config, the handler, Run.
func run(ctx context.Context, cfg consumer.Config, db *sql.DB, results string, opts ...consumer.Option) error {
	if err := CreateTable(ctx, db); err != nil {
		return err
	}
	c, err := consumer.New(cfg, &Ledger{DB: db, Results: results}, opts...)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
