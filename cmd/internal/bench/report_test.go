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
	return r
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
	for _, want := range []string{"## 1. Latency-bound", "## 2. Baselines", "## 3. Overhead-bound", "## 4. End to end", "## 5. Memory", "| kafka | 100 ms | sequential-per-partition | 8 | 80.0 | 1.00 | 9000 | 112 × |"} {
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
