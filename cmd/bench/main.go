// Command bench measures the pipeline against concurrency / latency, against
// the sequential designs it replaces, and against a plain goroutine pool,
// side by side in one run, on the in-process broker and (with -kafka) a
// real one, then end to end and for memory; it writes docs/benchmarks.md,
// docs/benchmarks.json and docs/throughput.png. `make bench` runs it with a
// throwaway PostgreSQL and Kafka broker.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rcrowley/go-metrics"

	"github.com/patchflow/patchflow/cmd/internal/bench"
)

func main() {
	out := flag.String("out", "docs", "directory for the report")
	quick := flag.Bool("quick", false, "shorter windows and fewer points (a smoke run)")
	kafka := flag.String("kafka", "", "bootstrap address of a real Kafka broker for scenarios 1-5 (empty: scenarios 1-4 on the in-process broker only, no scenario 5)")
	databaseURL := flag.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL for scenario 4 (empty: skip it)")
	listenerBin := flag.String("listener", "bin/listener", "the listener binary, for scenario 5")
	kafkaVersion := flag.String("kafka-version", "", "version of the real broker, for the report")
	only := flag.String("only", "core,end-to-end,memory", "scenarios to run: core (1-3), end-to-end (4), memory (5)")
	fromJSON := flag.String("from-json", "", "only rewrite the markdown and the plot from this benchmarks.json (no measuring)")
	events := flag.Int("events", 0, "events per end-to-end configuration (0: the plan's)")
	flag.Parse()
	metrics.UseNilMetrics = true // sarama's go-metrics would cost CPU in every measurement

	if *fromJSON != "" {
		r, err := bench.ReadReport(*fromJSON)
		must(err)
		must(r.WriteMarkdown(filepath.Join(*out, "benchmarks.md")))
		must(r.WritePlot(filepath.Join(*out, "throughput.png")))
		fmt.Printf("report rewritten in %s from %s\n", *out, *fromJSON)
		return
	}
	plan := bench.FullPlan()
	if *quick {
		plan = bench.QuickPlan()
	}
	if *events > 0 {
		plan.EndToEndEvents, plan.SequentialEvents, plan.Hosts = *events, max(*events/4, 50), max(*events/2, 50)
	}
	sources := []bench.Source{bench.KFake{}}
	if *kafka != "" {
		sources = append(sources, bench.NewKafka(strings.Split(*kafka, ",")))
	}
	r := bench.NewReport(plan.Describe())
	r.Members = plan.Members
	if *kafkaVersion != "" {
		r.Versions["Apache Kafka (real broker)"] = *kafkaVersion
	}
	if *databaseURL != "" {
		if v, err := bench.PostgresVersion(*databaseURL); err == nil {
			r.Versions["PostgreSQL"] = v
		}
	}
	started := time.Now()
	run := func(s string) bool { return strings.Contains(*only, s) }
	if run("core") {
		for _, src := range sources {
			must(plan.RunCore(src, r, os.Stdout))
		}
	}
	if run("end-to-end") && *databaseURL != "" {
		e := &bench.EndToEnd{DatabaseURL: *databaseURL, Partitions: plan.Partitions, Hosts: plan.Hosts, Log: os.Stdout}
		if *kafka != "" {
			e.Kafka = strings.Split(*kafka, ",")
		}
		_, err := e.Run(context.Background(), plan.EndToEndWarmup())
		must(err)
		for _, c := range plan.EndToEndConfigs() {
			res, err := e.Run(context.Background(), c)
			must(err)
			r.EndToEnd = append(r.EndToEnd, res)
		}
	}
	if run("memory") && *kafka != "" {
		for _, backlog := range plan.MemoryBacklogs {
			res, err := bench.Memory(*listenerBin, strings.Split(*kafka, ","), backlog, plan.MemoryRecordBytes, plan.MemoryConcurrency,
				plan.Partitions, plan.MemoryLatency, plan.MemoryWindow, os.Stdout)
			must(err)
			r.Memory = append(r.Memory, res)
		}
	}
	r.Took = time.Since(started).Round(time.Second).String()
	must(os.MkdirAll(*out, 0o755))
	must(r.WriteJSON(filepath.Join(*out, "benchmarks.json")))
	must(r.WriteMarkdown(filepath.Join(*out, "benchmarks.md")))
	must(r.WritePlot(filepath.Join(*out, "throughput.png")))
	fmt.Printf("report written to %s in %s\n", *out, r.Took)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
