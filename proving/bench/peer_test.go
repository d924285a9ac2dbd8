package bench

import (
	"strings"
	"testing"
)

// The peer's summary compares the means of each design's rounds, per
// workload, and names a workload only when both designs ran it.
func TestPeerTableComparesMeansPerWorkload(t *testing.T) {
	r := &Report{Peer: []PeerResult{
		{Workload: "results", Design: "patchflow", Round: 1, Records: 1000, Seconds: 0.1, CPUSeconds: 0.01},
		{Workload: "results", Design: "parallel-consumer", Round: 1, Records: 1000, Seconds: 0.4, CPUSeconds: 0.05},
		{Workload: "results", Design: "patchflow", Round: 2, Records: 1000, Seconds: 0.05, CPUSeconds: 0.03},
		{Workload: "results", Design: "parallel-consumer", Round: 2, Records: 1000, Seconds: 0.4, CPUSeconds: 0.15},
		{Workload: "batches", Design: "patchflow", Round: 1, Records: 1000, Seconds: 0.1, CPUSeconds: 0.01},
	}}
	var b strings.Builder
	r.peerTable(&b)
	out := b.String()
	// patchflow: 10,000 and 20,000 records/s, mean 15,000; the peer 2,500;
	// CPU 20 µs against 100.
	if !strings.Contains(out, "- results: patchflow 6.00 × Parallel Consumer's records/s (mean of 2 rounds: 15000 against 2500), 0.20 × its CPU per record.") {
		t.Errorf("no right summary of results in:\n%s", out)
	}
	if strings.Contains(out, "- batches:") {
		t.Errorf("batches summarised with one design only:\n%s", out)
	}
	if strings.Count(out, "| results |") != 4 || strings.Count(out, "| batches |") != 1 {
		t.Errorf("want a row per run:\n%s", out)
	}
	var empty strings.Builder
	(&Report{}).peerTable(&empty)
	if empty.Len() != 0 {
		t.Errorf("a report without the scenario wrote %q", empty.String())
	}
}
