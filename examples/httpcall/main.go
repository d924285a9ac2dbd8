// Command httpcall is patchflow's consumer with a handler of your own: each
// record of KAFKA_TOPIC is POSTed to ENRICH_URL (see Enricher), many at a
// time, one key at a time, and the group's offsets are committed only past
// records that are finished. Run it against a broker:
//
//	KAFKA_BROKERS=127.0.0.1:9092 KAFKA_TOPIC=events ENRICH_URL=http://127.0.0.1:8080/enrich go run ./examples/httpcall
//
// SIGTERM or Ctrl-C drains what is in flight, commits and exits.
package main

import (
	"context"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/patchflow/patchflow/consumer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := consumer.Config{
		Brokers: strings.Split(os.Getenv("KAFKA_BROKERS"), ","),
		Topic:   os.Getenv("KAFKA_TOPIC"),
		Group:   "httpcall-example",
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, cfg, os.Getenv("ENRICH_URL"), consumer.WithLogger(logger), consumer.WithHTTP("127.0.0.1:9000")); err != nil {
		log.Fatal(err)
	}
}

// run is the whole of the glue: a config, a handler, Run.
func run(ctx context.Context, cfg consumer.Config, url string, opts ...consumer.Option) error {
	handler := &Enricher{URL: url, Client: &http.Client{Timeout: 10 * time.Second}}
	c, err := consumer.New(cfg, handler, opts...)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}
