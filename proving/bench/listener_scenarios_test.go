package bench

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// buildListener builds cmd/listener-proving (the listener with the
// simulated handler, as make bench runs it) into dir.
func buildListener(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "listener")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/patchflow/patchflow/cmd/listener-proving").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/listener-proving: %v\n%s", err, out)
	}
	return bin
}

// The scenarios of the report run end to end against the listener binary
// on the in-process broker (the figures belong to `make bench`, on Apache
// Kafka): a crash replay loses nothing, every record handled twice is one
// the commit at the kill did not cover, and a resumed record is never run
// again; behind a pinned record admission stops at the span.
func TestListenerScenariosOnKFake(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the listener binary")
	}
	dir := t.TempDir()
	bin := buildListener(t, dir)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	fast := []string{"KAFKA_SESSION_TIMEOUT=6s", "KAFKA_HEARTBEAT_INTERVAL=1s"}

	t.Run("crash replay", func(t *testing.T) {
		// About 1,600 records/s, so the first process commits before the kill.
		c := &CrashReplay{Brokers: brokers, Records: 8000, RecordBytes: 100, Keys: 800, Partitions: 4, Latency: 20 * time.Millisecond,
			Concurrency: 32, PerPartition: 8, KillAt: 0.5, Work: t.TempDir(), Env: fast}
		if err := c.Prepare(); err != nil {
			t.Fatal(err)
		}
		res, err := c.Run(ListenerAfter, bin, 1, KillAfterCommit)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", res)
		if res.SinceCommitMS <= 0 || res.SinceCommitMS > 500 {
			t.Errorf("killed %.0f ms after the commit it waited for", res.SinceCommitMS)
		}
		if res.Never != 0 {
			t.Errorf("%d records never handled", res.Never)
		}
		if res.HandledBeforeKill < 4000 || res.HandledBeforeKill >= 8000 {
			t.Errorf("killed after %d of 8000 records, want about half", res.HandledBeforeKill)
		}
		if res.CommittedBelow == 0 {
			t.Errorf("nothing committed before the kill: the scenario measured no commit")
		}
		if res.RanCovered != 0 {
			t.Errorf("the second process ran %d records the commit at the kill covered", res.RanCovered)
		}
		if res.HandledTwice != res.NotCovered+res.RanCovered {
			t.Errorf("handled twice %d, but the first process completed %d the commit did not cover (and %d covered ones ran again)", res.HandledTwice, res.NotCovered, res.RanCovered)
		}
		if res.CommittedBelow+res.NamedFinished+res.NotCovered < res.HandledBeforeKill {
			t.Errorf("the commit and what it missed (%d + %d + %d) do not account for the %d handled before the kill", res.CommittedBelow, res.NamedFinished, res.NotCovered, res.HandledBeforeKill)
		}
	})

	t.Run("pinned record", func(t *testing.T) {
		const partitions, backlog, perPartition, pin = 4, 20000, 8, 10
		topic, err := MemoryTopic(brokers, backlog, 100, partitions)
		if err != nil {
			t.Fatal(err)
		}
		p := &Pinned{Brokers: brokers, Topic: topic, Backlog: backlog, RecordBytes: 100, Partitions: partitions, Concurrency: partitions * perPartition,
			PerPartition: perPartition, PinOffset: pin, Latency: time.Millisecond, Window: 8 * time.Second, Hold: 2 * time.Second,
			Work: t.TempDir(), SpanFactor: 64, Env: fast}
		res, err := p.Run(ListenerAfter, bin)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", res)
		if res.SpanBlocked != partitions || res.BlockedAfter < 0 {
			t.Errorf("%d of %d partitions span-blocked (all after %.1f s)", res.SpanBlocked, partitions, res.BlockedAfter)
		}
		if res.AdmittedInHold != 0 || res.MaxPastPin != res.SpanLimit-1 || res.SpanLimit != 64*perPartition {
			t.Errorf("admitted %d in the hold, at most %d past the pin, span %d: want 0, span - 1, %d", res.AdmittedInHold, res.MaxPastPin, res.SpanLimit, 64*perPartition)
		}
		if res.Committed != partitions*pin || res.InFlight != partitions {
			t.Errorf("committed %d, in flight %d: want every partition at its pin, with only the pin in flight", res.Committed, res.InFlight)
		}
		if res.PeakRSSMiB <= 0 {
			t.Errorf("peak RSS %v", res.PeakRSSMiB)
		}
	})
}
