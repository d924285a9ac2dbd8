package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rcrowley/go-metrics"

	"github.com/patchflow/patchflow/actors"
)

// Main is cmd/bench's whole program: it parses os.Args and exits.
func Main() {
	out := flag.String("out", "docs", "directory for the report")
	quick := flag.Bool("quick", false, "shorter windows and fewer points (a smoke run)")
	kafka := flag.String("kafka", "", "bootstrap address of a real Kafka broker for scenarios 1-5 (empty: scenarios 1-4 on the in-process broker only, no scenario 5)")
	databaseURL := flag.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL for scenario 4, which creates a database per listener beside this one (empty: skip it)")
	listenerBin := flag.String("listener", "bin/listener", "the listener binary, for scenarios 4 to 6")
	beforeBin := flag.String("listener-before", "", "the listener built at "+BeforeCommit+", the commit before issue 11, with the simulated handler's measurement knobs (.ci/listener-before; make bench builds it), measured beside -listener in the pinned and crash-replay scenarios (empty: -listener alone)")
	before37Bin := flag.String("listener-before37", "", "the listener built at "+BeforeHostileCommit+", the commit before issue 37 (make bin/listener-before37), measured beside -listener on hostile input (empty: -listener alone)")
	before12Bin := flag.String("listener-before12", "", "the listener built at "+BeforeEndToEndCommit+", the commit before issue 12 (make bin/listener-before12), measured beside -listener end to end (empty: -listener alone)")
	mockBin := flag.String("platform-mock", "bin/platform-mock", "the platform mock binary, for scenario 4")
	kafkaPID := flag.Int("kafka-pid", 0, "pid of the real broker's process, for its CPU in scenario 4 (0: not measured)")
	allowNotDurable := flag.Bool("allow-not-durable", false, "run scenario 4 on a PostgreSQL with fsync, synchronous_commit or full_page_writes off instead of refusing; the report marks its figures not publishable (smoke runs only)")
	kafkaVersion := flag.String("kafka-version", "", "version of the real broker, for the report")
	only := flag.String("only", "core,end-to-end,memory,pinned,crash-replay,reads,adaptive,start,hostile,effects,peer", "comma-separated scenarios to run: core (1-3), end-to-end (4), memory (5), pinned (5, a record that never finishes), crash-replay (6), reads (7, needs -database-url), adaptive (8, on the real broker when -kafka is set), start (9, the adaptive limit's first seconds, likewise), hostile (10, hostile records and answers; needs -kafka and -database-url), effects (11, the outbox's messages on and off; needs -database-url), peer (12, the library beside Parallel Consumer; needs -kafka and -peer-jar)")
	peerJar := flag.String("peer-jar", "", "the Parallel Consumer harness (proving/peer, built by make bench into proving/peer/target/peer-bench.jar), for scenario 12 (empty: skip it)")
	fromJSON := flag.String("from-json", "", "only rewrite the markdown and the plot from this benchmarks.json (no measuring)")
	events := flag.Int("events", 0, "events per end-to-end configuration (0: the plan's)")
	profile := flag.String("profile", "", "a directory for the listener profiles of the end-to-end and effects scenarios (CPU over -profile-seconds of each timed window, allocations): the listeners then serve /debug/pprof, which costs CPU, so a profiled run's figures are not for the report")
	profileSeconds := flag.Int("profile-seconds", 20, "seconds of each timed window the CPU profile covers")
	e2eConfigs := flag.String("end-to-end-configs", "", "comma-separated names of the end-to-end configurations to run (default, sequential, adaptive, fixed G=1024…; empty: all)")
	merge := flag.String("merge", "", "a benchmarks.json whose sections of the -only scenarios this run replaces, keeping the others and saying which run measured what (empty: a report of this run alone)")
	flag.Parse()
	metrics.UseNilMetrics = true // sarama's go-metrics would cost CPU in every measurement

	if *fromJSON != "" {
		r, err := ReadReport(*fromJSON)
		must(err)
		must(r.WriteMarkdown(filepath.Join(*out, "benchmarks.md")))
		must(r.WritePlot(filepath.Join(*out, "throughput.png")))
		must(r.WriteAdaptivePlot(filepath.Join(*out, "adaptive.png")))
		fmt.Printf("report rewritten in %s from %s\n", *out, *fromJSON)
		return
	}
	plan := FullPlan()
	if *quick {
		plan = QuickPlan()
	}
	if *events > 0 {
		plan.EndToEndEvents, plan.SequentialEvents, plan.Hosts = *events, max(*events/4, 50), max(*events/2, 50)
		plan.RecheckEvents, plan.RecheckHosts, plan.CompareEvents = *events, max(*events/2, 50), *events
	}
	sources := []Source{KFake{}}
	if *kafka != "" {
		sources = append(sources, NewKafka(strings.Split(*kafka, ",")))
	}
	r := NewReport(plan.Describe())
	r.Members = plan.Members
	if *kafkaVersion != "" {
		r.Versions["Apache Kafka (real broker)"] = *kafkaVersion
	}
	started := time.Now()
	stopSampling := SampleLoad(10 * time.Second)
	chosen := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		switch s = strings.TrimSpace(s); s {
		case "core", "end-to-end", "memory", "pinned", "crash-replay", "reads", "adaptive", "start", "hostile", "effects", "peer":
			chosen[s] = true
		default:
			must(fmt.Errorf("-only: unknown scenario %q", s))
		}
	}
	run := func(s string) bool { return chosen[s] }
	listeners := [][2]string{{ListenerAfter, *listenerBin}}
	if *beforeBin != "" {
		listeners = [][2]string{{ListenerBefore, *beforeBin}, {ListenerAfter, *listenerBin}}
	}
	work, err := os.MkdirTemp("", "patchflow-")
	must(err)
	fmt.Printf("listener and record logs in %s (removed when the run succeeds)\n", work)
	if run("core") {
		for _, src := range sources {
			must(plan.RunCore(src, r, os.Stdout))
		}
	}
	if run("end-to-end") && *databaseURL != "" {
		ctx := context.Background()
		e := &EndToEnd{DatabaseURL: *databaseURL, Partitions: plan.Partitions, MockBin: *mockBin, KafkaPID: *kafkaPID, Work: work, Log: os.Stdout,
			AllowNotDurable: *allowNotDurable, Profile: *profile, ProfileSeconds: *profileSeconds}
		if *kafka != "" {
			e.Kafka = strings.Split(*kafka, ",")
		}
		must(e.Prepare(ctx))
		r.Postgres = &e.Postgres
		fmt.Printf("end to end on %s\n", e.Postgres)
		e2e := [][2]string{{ListenerAfter, *listenerBin}}
		if *before12Bin != "" {
			e2e = [][2]string{{ListenerBefore, *before12Bin}, {ListenerAfter, *listenerBin}}
		}
		for _, l := range e2e {
			_, err := e.Run(ctx, l[0], l[1], plan.EndToEndWarmup())
			must(err)
		}
		for _, c := range plan.EndToEndConfigs() {
			if *e2eConfigs != "" && !slices.Contains(strings.Split(*e2eConfigs, ","), c.Name) {
				continue
			}
			for _, l := range e2e {
				if c.OnlyListener != "" && c.OnlyListener != l[0] {
					continue
				}
				res, err := e.Run(ctx, l[0], l[1], c)
				must(err)
				r.EndToEnd = append(r.EndToEnd, res)
			}
		}
		must(e.Close())
	}
	if run("effects") && *databaseURL != "" {
		ctx := context.Background()
		e := &EndToEnd{DatabaseURL: *databaseURL, Partitions: plan.Partitions, MockBin: *mockBin, KafkaPID: *kafkaPID, Work: work, Log: os.Stdout,
			AllowNotDurable: *allowNotDurable, Profile: *profile, ProfileSeconds: *profileSeconds}
		if *kafka != "" {
			e.Kafka = strings.Split(*kafka, ",")
		}
		must(e.Prepare(ctx))
		r.Postgres = &e.Postgres
		_, err := e.Run(ctx, ListenerAfter, *listenerBin, plan.EndToEndWarmup())
		must(err)
		for _, c := range plan.EffectsConfigs() {
			res, err := e.Run(ctx, ListenerAfter, *listenerBin, c)
			must(err)
			r.Effects = append(r.Effects, res)
		}
		must(e.Close())
	}
	var largest string // the topic of the largest backlog
	if run("memory") && *kafka != "" {
		for _, backlog := range plan.MemoryBacklogs {
			res, err := Memory(*listenerBin, strings.Split(*kafka, ","), backlog, plan.MemoryRecordBytes, plan.MemoryConcurrency,
				plan.Partitions, plan.MemoryLatency, plan.MemoryWindow, os.Stdout)
			must(err)
			r.Memory = append(r.Memory, res)
			largest = res.Topic
		}
	}
	if run("pinned") && *kafka != "" {
		backlog := plan.MemoryBacklogs[len(plan.MemoryBacklogs)-1]
		if largest == "" {
			largest, err = MemoryTopic(strings.Split(*kafka, ","), backlog, plan.MemoryRecordBytes, plan.Partitions)
			must(err)
		}
		p := &Pinned{Brokers: strings.Split(*kafka, ","), Topic: largest, Backlog: backlog, RecordBytes: plan.MemoryRecordBytes,
			Partitions: plan.Partitions, Concurrency: plan.MemoryConcurrency, PerPartition: plan.MemoryConcurrency / plan.Partitions,
			PinOffset: plan.PinOffset, Latency: plan.PinLatency, Window: plan.PinWindow, Hold: plan.PinHold, Work: work, Log: os.Stdout,
			SpanFactor: actors.DefaultSpanFactor}
		for _, l := range listeners {
			res, err := p.Run(l[0], l[1])
			must(err)
			r.Pinned = append(r.Pinned, res)
		}
	}
	if run("crash-replay") && *kafka != "" {
		c := &CrashReplay{Brokers: strings.Split(*kafka, ","), Records: plan.CrashRecords, RecordBytes: plan.CrashRecordBytes, Keys: plan.CrashKeys,
			Partitions: plan.Partitions, Latency: plan.CrashLatency, Concurrency: plan.CrashConcurrency, PerPartition: plan.CrashPerPartition,
			KillAt: plan.CrashKillAt, Work: work, Log: os.Stdout}
		must(c.Prepare())
		for i, kill := range plan.CrashKills {
			for _, l := range listeners {
				res, err := c.Run(l[0], l[1], i+1, kill)
				must(err)
				r.Crash = append(r.Crash, res)
			}
		}
	}
	if run("reads") && *databaseURL != "" {
		reads := &Reads{DatabaseURL: *databaseURL, Plan: plan.Reads, Log: os.Stdout}
		r.Reads, err = reads.Run(context.Background())
		must(err)
	}
	if run("adaptive") {
		r.Adaptive, err = plan.Adaptive.Run(sources[len(sources)-1], plan.Partitions, os.Stdout)
		must(err)
	}
	if run("start") {
		r.Start, err = plan.Start.Run(sources[len(sources)-1], plan.Partitions, os.Stdout)
		must(err)
	}
	if run("hostile") && *kafka != "" && *databaseURL != "" {
		h := &Hostile{Brokers: strings.Split(*kafka, ","), DatabaseURL: *databaseURL, Partitions: plan.Partitions, Ordinary: 200,
			Limit: 3 * time.Minute, MemoryLimit: HostilePodMemory, Work: work, Log: os.Stdout}
		must(h.Prepare())
		runs := [][2]string{{ListenerAfter, *listenerBin}}
		if *before37Bin != "" {
			runs = [][2]string{{ListenerBefore, *before37Bin}, {ListenerAfter, *listenerBin}}
		}
		for _, l := range runs {
			res, err := h.Run(context.Background(), l[0], l[1], l[0] == ListenerAfter)
			must(err)
			r.Hostile = append(r.Hostile, res...)
		}
		must(h.Close())
	}
	if run("peer") && *kafka != "" && *peerJar != "" {
		p := plan.Peer
		p.Brokers, p.Jar, p.Log = strings.Split(*kafka, ","), *peerJar, os.Stdout
		r.Peer, err = p.Run()
		must(err)
		r.Versions["Confluent Parallel Consumer (peer)"] = PeerVersion
	}
	_ = os.RemoveAll(work) // kept when a scenario failed: must exits first
	r.Took = time.Since(started).Round(time.Second).String()
	r.Load = stopSampling()
	if *merge != "" {
		base, err := ReadReport(*merge)
		must(err)
		var names []string
		for _, s := range strings.Split(*only, ",") {
			names = append(names, strings.TrimSpace(s))
		}
		must(base.Merge(r, names))
		r = base
	}
	must(os.MkdirAll(*out, 0o755))
	must(r.WriteJSON(filepath.Join(*out, "benchmarks.json")))
	must(r.WriteMarkdown(filepath.Join(*out, "benchmarks.md")))
	must(r.WritePlot(filepath.Join(*out, "throughput.png")))
	must(r.WriteAdaptivePlot(filepath.Join(*out, "adaptive.png")))
	fmt.Printf("report written to %s in %s\n", *out, time.Since(started).Round(time.Second))
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
