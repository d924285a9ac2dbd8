package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sampleReport() *Report {
	r := NewReport("test")
	r.Took, r.Members = "1s", 4
	r.Load = &Load{Mean: 3.3, Max: 7.5, Samples: 12}
	for _, broker := range []string{"kfake", "kafka"} {
		r.Points = append(r.Points,
			Point{Scenario: ScenarioLatency, Design: DesignActors, Broker: broker, LatencyMS: 10, Concurrency: 16, PerSecond: 1500, Ideal: 1600, Ratio: 0.94},
			Point{Scenario: ScenarioLatency, Design: DesignActors, Broker: broker, LatencyMS: 10, Concurrency: 1024, PerSecond: 80000, Ideal: 102400, Ratio: 0.78},
			Point{Scenario: ScenarioLatency, Design: DesignActors, Broker: broker, LatencyMS: 100, Concurrency: 1024, PerSecond: 9000, Ideal: 10240, Ratio: 0.88},
			Point{Scenario: ScenarioBaseline, Design: DesignSequential, Broker: broker, LatencyMS: 100, Concurrency: 8, PerSecond: 80, Ideal: 80, Ratio: 1},
			Point{Scenario: ScenarioOverhead, Design: DesignActors, Broker: broker, PerSecond: 400000},
			Point{Scenario: ScenarioOverhead, Design: DesignPool, Broker: broker, PerSecond: 500000},
		)
	}
	r.EndToEnd = []EndToEndResult{
		{EndToEndConfig: EndToEndConfig{Name: "sequential"}, SystemsPerSec: 40},
		{EndToEndConfig: EndToEndConfig{Name: "default"}, SystemsPerSec: 80, Broker: "kafka"},
		{EndToEndConfig: EndToEndConfig{Name: "C=32"}, SystemsPerSec: 90, Broker: "kafka"},
	}
	r.Memory = []MemoryResult{{Backlog: 100000, PeakRSSMiB: 80}, {Backlog: 1000000, PeakRSSMiB: 84}}
	r.Pinned = []PinnedResult{
		{Listener: ListenerBefore, Backlog: 1000000, Partitions: 8, PerPartition: 128, PinOffset: 100, HoldSeconds: 5, Admitted: 1000000, MaxPastPin: 124900, AdmittedInHold: 30000, SpanBlocked: -1, BlockedAfter: -1, MetadataMaxBytes: -1, PeakRSSMiB: 120},
		{Listener: ListenerAfter, Backlog: 1000000, Partitions: 8, PerPartition: 128, PinOffset: 100, SpanLimit: 8192, HoldSeconds: 5, Admitted: 66344, MaxPastPin: 8191, SpanBlocked: 8, BlockedAfter: 1.5, MetadataMaxBytes: 30, PeakRSSMiB: 60},
	}
	r.Crash = []CrashResult{
		{Listener: ListenerBefore, Kill: KillAfterCommit, Records: 200000, HandledTwice: 1000, NotCovered: 1000, SinceCommit: 100},
		{Listener: ListenerAfter, Kill: KillAfterCommit, Records: 200000, HandledTwice: 150, NotCovered: 150, SinceCommit: 120, NamedFinished: 900, MetadataBytes: 400, MetadataMaxBytes: 60},
		{Listener: ListenerBefore, Kill: KillAnywhere, Records: 200000, HandledTwice: 8000},
		{Listener: ListenerAfter, Kill: KillAnywhere, Records: 200000, HandledTwice: 9000},
	}
	return r
}

// The pinned-record and crash-replay verdicts follow the numbers: admission
// that goes on in the hold, a record never handled, or no fewer records
// handled twice than before is "not met".
func TestPinnedAndCrashTargets(t *testing.T) {
	rows := func(r *Report) map[string][4]string {
		got := map[string][4]string{}
		for _, row := range r.targets() {
			got[row[0]] = row
		}
		return got
	}
	r := sampleReport()
	got := rows(r)
	if row := got["5. memory, a pinned record (kafka)"]; row[3] != "met" || !strings.Contains(row[2], "8 of 8 partitions span-blocked (all 1.5 s after the start); at most 8191 offsets admitted past the pin (span 8192); 0 admitted in the last 5 s") ||
		!strings.Contains(row[2], "before this issue: 1000000 admitted, up to 124900 past the pin, 120 MiB") {
		t.Errorf("pinned row %q", row)
	}
	if row := got["6. crash replay (kafka)"]; row[3] != "met" || !strings.Contains(row[2], "killed after a commit: 150 handled twice, before this issue 1000 (0.15 ×); 0 never handled in 4 runs") {
		t.Errorf("crash row %q", row)
	}
	r.Pinned[1].AdmittedInHold = 1
	r.Crash[3].Never = 1
	got = rows(r)
	if got["5. memory, a pinned record (kafka)"][3] != "**not met**" || got["6. crash replay (kafka)"][3] != "**not met**" {
		t.Errorf("admission in the hold, or a record never handled, still met: %q", got)
	}
	r = sampleReport()
	r.Crash[1].HandledTwice = 1000
	if row := rows(r)["6. crash replay (kafka)"]; row[3] != "**not met**" {
		t.Errorf("more handled twice than before is %q", row)
	}
}

// The verdicts follow the numbers: a ratio under the target is "not met",
// a point whose ideal is above 20,000/s does not count, the best end-to-end
// configuration is named, and the overhead ratio is actors over pool.
func TestTargetsFollowTheMeasurements(t *testing.T) {
	r := sampleReport()
	got := map[string][4]string{}
	for _, row := range r.targets() {
		got[row[0]] = row
	}
	if row := got["1. latency-bound (kafka)"]; !strings.Contains(row[2], "lowest ratio 0.88 (100 ms, C = 1024) over 2 points") || row[3] != "**not met**" {
		t.Errorf("latency row %q", row)
	}
	if row := got["3. overhead-bound (kfake)"]; row[2] != "0.80" || row[3] != "met" {
		t.Errorf("overhead row %q", row)
	}
	if row := got["4. end to end (kafka)"]; !strings.Contains(row[2], "90 systems/s at C=32 (15 ×)") || row[3] != "**not met**" {
		t.Errorf("end-to-end row %q", row)
	}
	if row := got["5. memory (kafka)"]; !strings.Contains(row[2], "(1.05 ×)") || row[3] != "met" {
		t.Errorf("memory row %q", row)
	}
	r.Memory[1].PeakRSSMiB = 200
	for _, row := range r.targets() {
		if row[0] == "5. memory (kafka)" && row[3] != "**not met**" {
			t.Errorf("memory that grows 2.5 times is %q", row[3])
		}
	}
}

// The report's three files are written; the plot only when there is
// something to draw.
func TestReportFiles(t *testing.T) {
	dir := t.TempDir()
	r := sampleReport()
	if err := r.WriteMarkdown(filepath.Join(dir, "b.md")); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(filepath.Join(dir, "b.json")); err != nil {
		t.Fatal(err)
	}
	if err := r.WritePlot(filepath.Join(dir, "b.png")); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "b.md"))
	for _, want := range []string{"## 1. Latency-bound", "## 2. Baselines", "## 3. Overhead-bound", "## 4. End to end", "## 5. Memory", "### A record that never finishes", "## 6. Crash replay",
		"| after | 8192 | 66344 | 8191 | 0 | 0 | 0 | 8 of 8 | 1.5 | 30 | 60 | 0 |", "| before | none | 1000000 | 124900 | 30000 | 0 | 0 | – | – | – | 120 | 0 |",
		"- Machine load during the run (1-minute load average, 12 samples): mean 3.3, highest 7.5", "Killed after a commit: handled twice 1000 before, 150 after (0.15 ×)", "Killed anywhere: handled twice 8000 before, 9000 after (1.12 ×)",
		"| after | after a commit | 0 | 0 | 0 | 120 | 0 | 900 | 400 (60) | 150 | 30 | 150 | 0 | 0 | 0.0 | 0.0 | 0 |", "| kafka | 100 ms | sequential-per-partition | 8 | 80.0 | 1.00 | 9000 | 112 × |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "b.png")); err != nil || st.Size() < 1000 {
		t.Errorf("plot missing or empty: %v", err)
	}
	empty := NewReport("none")
	if err := empty.WritePlot(filepath.Join(dir, "none.png")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "none.png")); !os.IsNotExist(err) {
		t.Errorf("a plot was written without points")
	}
}

// Peak memory is read from the kernel for a live process.
func TestProcStatusReadsThisProcess(t *testing.T) {
	s, err := procStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s["VmHWM"] <= 0 || s["VmRSS"] <= 0 || s["VmHWM"] < s["VmRSS"] {
		t.Fatalf("VmHWM %v VmRSS %v", s["VmHWM"], s["VmRSS"])
	}
}
