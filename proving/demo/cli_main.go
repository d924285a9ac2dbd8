package demo

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // served with -pprof
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/patchflow/patchflow/internal/listener"
)

// Main is cmd/demo's whole program: it parses os.Args and exits.
func Main() {
	opts := DefaultOptions()
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	fs.IntVar(&opts.Load.Events, "events", opts.Load.Events, "good events to produce")
	fs.IntVar(&opts.Load.Hosts, "hosts", opts.Load.Hosts, "hosts")
	fs.Float64Var(&opts.Load.BadShare, "bad-share", opts.Load.BadShare, "share of bad messages (dead-lettered)")
	fs.StringVar(&opts.VMaaSLatency, "vmaas-latency", opts.VMaaSLatency, "VMaaS latency: fixed:D, uniform:D1-D2 or longtail:D")
	fs.IntVar(&opts.Lead, "lead", opts.Lead, "messages the producer may run ahead of the group's committed offsets (bounds the broker's memory)")
	fs.IntVar(&opts.CompareEvents, "compare-events", opts.CompareEvents,
		"good events of the stream each design (the pipeline, one record at a time per partition) is measured on, in turn (0: no comparison)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060), for heap profiles during the run")
	_ = fs.Parse(os.Args[1:])
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			os.Exit(2)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *pprofAddr != "" {
		go func() { fmt.Fprintln(os.Stderr, "demo: pprof:", http.ListenAndServe(*pprofAddr, nil)) }()
	}
	if os.Getenv("DATABASE_URL") == "" {
		fmt.Fprintln(os.Stderr, "demo: set DATABASE_URL, or run `make demo`, which starts a throwaway PostgreSQL")
		os.Exit(2)
	}
	// The listener's settings come from the environment, with demo defaults.
	env := func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, true
		}
		switch k {
		case "KAFKA_BROKERS":
			return listener.EmbeddedBrokers, true
		case "LISTENER_PROGRESS_INTERVAL":
			return "0", true
		case "LOG_LEVEL":
			return "error", true // the demo dead-letters on purpose; skip the warning per record
		case "VMAAS_CACHE_SIZE":
			// The listener's default keeps 10,000 answers: over 1 GB at the
			// demo's 400-package profiles, for the few repeats of its stream.
			return VMaaSCacheSize, true
		}
		return "", false
	}
	logger := listener.NewLogger(os.Stderr, "error", "text")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	start := time.Now()
	if _, err := Run(ctx, env, opts, os.Stdout, logger); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
	fmt.Printf("  demo total        %v\n", time.Since(start).Round(time.Millisecond))
	if peak, err := PeakRSS(); err == nil {
		fmt.Printf("  peak memory       %.0f MiB resident at most (VmHWM of this process: broker, producer, listener, platform mock)\n", float64(peak)/(1<<20))
	}
}
