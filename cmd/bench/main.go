// Command bench measures the pipeline against concurrency / latency, against
// the sequential designs it replaces, and against a plain goroutine pool,
// side by side in one run, on the in-process broker and (with -kafka) a
// real one, then end to end and for memory; it writes docs/benchmarks.md,
// docs/benchmarks.json and docs/throughput.png. `make bench` runs it with a
// throwaway PostgreSQL and Kafka broker.
package main

import "github.com/patchflow/patchflow/proving/bench"

func main() { bench.Main() }
