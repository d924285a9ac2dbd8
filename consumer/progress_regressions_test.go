package consumer

// Regressions of a review of caught-up detection and the dependency
// warnings; each failed before its fix.

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

// A claim whose records are fetched and buffered, none admitted yet, under
// a committed offset at or past the high watermark (a stale one, as the
// claim-start read once showed): every record is unread, so it is not
// caught up whatever the lag says.
func TestNotCaughtUpWithRecordsFetchedAndWaiting(t *testing.T) {
	p := actors.PartitionState{Committed: 100, Admitted: -1, Start: sarama.OffsetOldest, HighWatermark: 5, Buffered: 5}
	if caughtUp([]actors.PartitionState{p}) {
		t.Errorf("caughtUp = true for %+v: 5 records buffered, none read", p)
	}
}

// A dependency failing records' own attempts without pause (a steady share
// of hosts VMaaS fails while it serves the rest: never a warning) must not
// keep every record it ever failed, and a shared failure that finally comes
// must not be counted with records and a period from hours ago.
func TestOwnFailuresDoNotGrowWithoutBound(t *testing.T) {
	at := time.Unix(1000, 0)
	var w troubleWatch
	const seconds = 3600
	for s := range seconds {
		f := []actors.DependencyFailures{{Dependency: "vmaas", Attempts: 1, Records: []string{fmt.Sprintf("t/0@%d", s)}}}
		if lines := w.step(at.Add(time.Duration(s)*time.Second), f); len(lines) != 0 {
			t.Fatalf("own failures warned: %+v", lines)
		}
	}
	if n := len(w.deps["vmaas"].records); n > 2*int(troubleQuiet/time.Second) {
		t.Errorf("after an hour of own failures (one new record a second) the watch holds %d records; want a bound", n)
	}
	lines := w.step(at.Add(seconds*time.Second), []actors.DependencyFailures{{Dependency: "vmaas", Attempts: 1, Shared: 1,
		Records: []string{"t/0@99999"}, LastError: "503"}})
	if len(lines) != 1 || !lines[0].warn {
		t.Fatalf("a shared failure: %+v; want a warning", lines)
	}
	if l := lines[0]; l.records > 2*int(troubleEvery/time.Second) || l.over > 2*troubleEvery {
		t.Errorf("first warning: %d records retrying over %v, %d failed attempts; the outage is one attempt of one record",
			l.records, l.over, l.Attempts)
	}
}

// The recovery line says how long the dependency was failing, not the time
// since the last warning (a ten-minute outage once read "recovered after
// 19s").
func TestRecoverySaysHowLongItFailed(t *testing.T) {
	at := time.Unix(1000, 0)
	var w troubleWatch
	const outage = 600
	for s := range outage {
		w.step(at.Add(time.Duration(s)*time.Second), []actors.DependencyFailures{{Dependency: "database", Attempts: 1, Shared: 1,
			Records: []string{"t/0@1"}}})
	}
	var rec *troubleLine
	for s := outage; s < outage+30 && rec == nil; s++ {
		for _, l := range w.step(at.Add(time.Duration(s)*time.Second), nil) {
			if !l.warn {
				rec = &l
			}
		}
	}
	if rec == nil {
		t.Fatal("no recovery line")
	}
	if rec.over < outage*time.Second {
		t.Errorf("recovered after %v; the dependency failed for %ds", rec.over, outage)
	}
}

// At most one warning per dependency per troubleEvery, a recovery between
// them included: failures at +0, +1 and +12 once warned at +10 and again at
// +12, with "recovered" at +11 between.
func TestWarningsAtMostOncePerTroubleEvery(t *testing.T) {
	at := time.Unix(1000, 0)
	var w troubleWatch
	shared := []actors.DependencyFailures{{Dependency: "vmaas", Attempts: 1, Shared: 1, Records: []string{"t/0@1"}, LastError: "503"}}
	var warned []time.Duration
	for s := 0; s <= 30; s++ {
		var f []actors.DependencyFailures
		if s == 0 || s == 1 || s == 12 {
			f = shared
		}
		for _, l := range w.step(at.Add(time.Duration(s)*time.Second), f) {
			t.Logf("+%ds: warn=%v %+v", s, l.warn, l.DependencyFailures)
			if l.warn {
				warned = append(warned, time.Duration(s)*time.Second)
			}
		}
	}
	for i := 1; i < len(warned); i++ {
		if d := warned[i] - warned[i-1]; d < troubleEvery {
			t.Errorf("warnings at +%v and +%v: %v apart, want at least %v", warned[i-1], warned[i], d, troubleEvery)
		}
	}
}
