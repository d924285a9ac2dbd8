package bench

import (
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/patchflow/patchflow/internal/telemetry"
)

// burnEnv makes the test binary burn that much CPU and exit (TestMain), so
// tests can start processes whose CPU time they know.
const burnEnv = "PATCHFLOW_BENCH_TEST_BURN"

// burn spins until this process has used d of CPU.
func burn(d time.Duration) {
	start := cpuTime()
	for x := 0; cpuTime()-start < d; x++ {
		_ = math.Sqrt(float64(x))
	}
}

// A stat line's fields are counted from the last ')': the command may hold
// spaces and parentheses.
func TestParseProcStat(t *testing.T) {
	line := "4242 (post gres: (wal) writer) S 77 4242 4242 0 -1 4194368 300 0 0 0 150 25 7 3 20 0 1 0 123 0 0 18446744073709551615\n"
	got, err := parseProcStat([]byte(line))
	if err != nil || got.ppid != 77 || got.self != 1750*time.Millisecond || got.reaped != 100*time.Millisecond {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := parseProcStat([]byte("4242 (short) S 1 2")); err == nil {
		t.Fatal("a short line parsed")
	}
}

// treeCPU counts a child's CPU while it runs and, once its parent has
// reaped it, through the parent's cutime; the parent's own time alone
// does not hold it.
func TestTreeCPUCountsLiveAndReapedChildren(t *testing.T) {
	const work = 300 * time.Millisecond
	// sh runs the burner, waits for it (reaping it), then becomes a sleep
	// (exec keeps the pid and the reaped time).
	cmd := exec.Command("sh", "-c", fmt.Sprintf("%q -test.run='^$'; exec sleep 60", os.Args[0]))
	cmd.Env = append(os.Environ(), burnEnv+"="+work.String())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sh := cmd.Process.Pid
	sawLive := false
	err := poll("the burner's CPU in the tree", 5*time.Millisecond, 30*time.Second, func() (bool, error) {
		children, err := childrenOf()
		if err != nil {
			return false, err
		}
		tree, err := treeCPU(sh)
		if err != nil {
			return false, err
		}
		if len(children[sh]) > 0 && tree >= work/3 {
			sawLive = true // counted while the child runs
		}
		t, err := readProcTimes(sh)
		return err == nil && t.reaped >= work-3*clockTick, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawLive {
		t.Error("the running child's CPU never showed in the tree")
	}
	tree, err := treeCPU(sh)
	self, _ := processCPU(sh)
	if err != nil || tree < work-3*clockTick || self >= work/3 {
		t.Fatalf("after the child ended: tree %v, the parent's own %v (%v)", tree, self, err)
	}
}

// The metrics parser reads what the listener's registry serves: the
// handler histogram's mean is exact, its quantiles fall in the right
// bucket, and counters add up across labels.
func TestMetricsFromTheListenersRegistry(t *testing.T) {
	m := telemetry.New()
	for range 100 {
		m.HandlerDone("ok", 150*time.Millisecond)
	}
	m.HandlerDone("transient", 3*time.Second)
	m.Dependency("vmaas", 120*time.Millisecond, nil)
	m.Dependency("database", 20*time.Millisecond, nil)
	m.Dependency("database", 10*time.Millisecond, errors.New("refused"))
	m.Dependency("database", 10*time.Millisecond, nil)
	srv := httptest.NewServer(promhttp.HandlerFor(m.Gatherer, promhttp.HandlerOpts{}))
	defer srv.Close()
	sc, err := fetchMetrics(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	h := sc.histogramOf("patchflow_handler_duration_seconds")
	if h.count != 101 || math.Abs(h.mean()-(15+3)/101.0) > 1e-9 {
		t.Fatalf("count %v, mean %v", h.count, h.mean())
	}
	if p50, p99 := h.quantile(0.5), h.quantile(0.99); p50 < 0.128 || p50 > 0.256 || p99 < 0.128 || p99 > 0.256 {
		t.Fatalf("p50 %v, p99 %v: want both in the 128-256 ms bucket", p50, p99)
	}
	if p := h.quantile(1); p < 2.048 || p > 4.096 {
		t.Fatalf("the slowest attempt, %v s, is not in the 2-4 s bucket", p)
	}
	deps := sc.byLabel("patchflow_dependency_duration_seconds_sum", "dependency")
	if len(deps) != 2 || math.Abs(deps["vmaas"]-0.12) > 1e-9 || math.Abs(deps["database"]-0.04) > 1e-9 {
		t.Fatalf("time by dependency %v, want vmaas 0.12 s and database 0.04 s (every result)", deps)
	}
}

// Quantiles interpolate inside a bucket as histogram_quantile does; label
// values may hold escapes.
func TestHistogramQuantileAndLabels(t *testing.T) {
	text := strings.Join([]string{
		"# TYPE h histogram",
		`h_bucket{a="x \"y\", z",le="1"} 0`,
		`h_bucket{a="x \"y\", z",le="2"} 10`,
		`h_bucket{a="x \"y\", z",le="4"} 20`,
		`h_bucket{a="x \"y\", z",le="+Inf"} 25`,
		`h_sum{a="x \"y\", z"} 60`,
		`h_count{a="x \"y\", z"} 25`,
		`c{outcome="ok"} 3 1700000000000`,
		`c{outcome="skipped"} 4`,
		"g 7",
	}, "\n")
	sc, err := parseMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	if sc[0].labels["a"] != `x "y", z` {
		t.Fatalf("label %q", sc[0].labels["a"])
	}
	h := sc.histogramOf("h")
	for q, want := range map[float64]float64{0.4: 2, 0.6: 3, 0.8: 4, 0.99: 4} {
		if got := h.quantile(q); math.Abs(got-want) > 1e-9 {
			t.Errorf("q %v: %v, want %v", q, got, want)
		}
	}
	if h.mean() != 2.4 || sc.sum("c", outcomeIn("ok", "skipped")) != 7 || sc.sum("c", outcomeIn("ok")) != 3 || sc.sum("g", nil) != 7 {
		t.Fatalf("mean %v, sums %v %v", h.mean(), sc.sum("c", nil), sc.sum("g", nil))
	}
	if !math.IsNaN((histogram{}).quantile(0.5)) {
		t.Fatal("a quantile of nothing")
	}
	if _, err := parseMetrics(`x{a="b} 1`); err == nil {
		t.Fatal("an unterminated label parsed")
	}
}
