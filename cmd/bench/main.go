// Command bench measures the pipeline against concurrency / latency and
// against the sequential designs it replaces, side by side in one run, and
// writes docs/benchmarks.md, docs/benchmarks.json and docs/throughput.png.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rcrowley/go-metrics"

	"github.com/patchflow/patchflow/cmd/internal/bench"
)

func main() {
	out := flag.String("out", "docs", "directory for the report")
	quick := flag.Bool("quick", false, "shorter windows (for a smoke run)")
	flag.Parse()
	metrics.UseNilMetrics = true
	w := bench.Window{Warmup: 1500 * time.Millisecond, Measure: 3 * time.Second}
	slow := bench.Window{Warmup: 2 * time.Second, Measure: 6 * time.Second}
	if *quick {
		w = bench.Window{Warmup: 500 * time.Millisecond, Measure: time.Second}
		slow = w
	}
	const partitions = 8
	r := bench.NewReport(fmt.Sprintf("8 partitions; key ordering with a key per record; concurrency spread evenly over partitions (S = concurrency / 8, G = concurrency); windows: %v warm-up + %v measured (500 ms: %v + %v)",
		w.Warmup, w.Measure, slow.Warmup, slow.Measure))
	for _, latency := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond} {
		win := w
		if latency >= 500*time.Millisecond {
			win = slow
		}
		for _, c := range []int{16, 64, 256, 1024, 4096} {
			p, err := bench.Actors(latency, partitions, c, win)
			must(err)
			fmt.Printf("actors      L=%-6v C=%-5d %9.0f records/s  ideal %9.0f  ratio %.2f\n", latency, c, p.PerSecond, p.Ideal, p.Ratio)
			r.Points = append(r.Points, p)
		}
		for _, perPartition := range []bool{true, false} {
			p, err := bench.Sequential(latency, partitions, 4, perPartition, win)
			must(err)
			fmt.Printf("%-24s L=%-6v %7.1f records/s (ideal %.1f)\n", p.Design, latency, p.PerSecond, p.Ideal)
			r.Points = append(r.Points, p)
		}
	}
	must(os.MkdirAll(*out, 0o755))
	must(r.WriteJSON(filepath.Join(*out, "benchmarks.json")))
	must(r.WriteMarkdown(filepath.Join(*out, "benchmarks.md")))
	must(r.WritePlot(filepath.Join(*out, "throughput.png")))
	fmt.Printf("report written to %s\n", *out)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
