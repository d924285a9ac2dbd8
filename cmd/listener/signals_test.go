package main_test

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A second SIGTERM or SIGINT during a drain that would take half a minute
// exits at once, with 128 + the signal's number, leaving the records in
// flight unfinished (Kafka redelivers them).
func TestSecondSignalExitsWithoutFinishingTheDrain(t *testing.T) {
	bin := buildProvingListener(t)
	for _, c := range []struct {
		signal os.Signal
		code   int
	}{{syscall.SIGTERM, 143}, {syscall.SIGINT, 130}} {
		t.Run(c.signal.String(), func(t *testing.T) {
			// LOG_LEVEL=debug for the partition's "draining" line.
			p := startListener(t, bin, "EMBEDDED_PARTITIONS=1", "LISTENER_SIMULATED_LATENCY=30s", "LISTENER_DRAIN_TIMEOUT=60s", "LOG_LEVEL=debug")
			p.Produce(3)
			p.WaitInFlight(3)

			first := time.Now()
			p.Signal(c.signal)
			p.WaitLine(`level=DEBUG msg=draining `, 10*time.Second)
			// The drain is under way, and will wait for the handlers' 30 s.
			if n := p.InFlight(); n != 3 {
				t.Fatalf("%d records in flight after the first signal, want 3 still running", n)
			}
			p.Signal(c.signal)
			code := p.WaitExit(10 * time.Second)
			took := time.Since(first)
			if code != c.code {
				t.Fatalf("exit code %d after a second %v, want %d:\n%s", code, c.signal, c.code, p.Logs())
			}
			if took > 10*time.Second {
				t.Fatalf("exited %v after the first signal: the drain was not cut short", took)
			}
			logs := p.Logs()
			if !strings.Contains(logs, "signal received: draining in-flight records") {
				t.Fatalf("no line for the first signal:\n%s", logs)
			}
			if !strings.Contains(logs, "second signal: exiting without finishing the drain; unfinished records will be redelivered") {
				t.Fatalf("no line for the second signal:\n%s", logs)
			}
			if strings.Contains(logs, "consumer stopped") {
				t.Fatalf("the drain finished before the second signal:\n%s", logs)
			}
		})
	}
}

// One SIGTERM lets the records in flight finish before the listener
// leaves, and it exits 0.
func TestOneSignalFinishesTheRecordsInFlightAndExitsZero(t *testing.T) {
	bin := buildProvingListener(t)
	p := startListener(t, bin, "EMBEDDED_PARTITIONS=1", "LISTENER_SIMULATED_LATENCY=3s", "LISTENER_DRAIN_TIMEOUT=60s")
	p.Produce(3)
	p.WaitInFlight(3)
	p.Signal(syscall.SIGTERM)
	if code := p.WaitExit(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after one SIGTERM, want 0:\n%s", code, p.Logs())
	}
	if stopped := p.WaitLine("consumer stopped", time.Second); !strings.Contains(stopped, "succeeded=3 ") || !strings.Contains(stopped, "abandoned=0 ") {
		t.Fatalf("the drain did not let the 3 records in flight finish: %s", stopped)
	}
}
