package consumer

import (
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
)

func TestCaughtUp(t *testing.T) {
	done := actors.PartitionState{HighWatermark: 10, Committed: 10}
	for name, c := range map[string]struct {
		parts []actors.PartitionState
		want  bool
	}{
		"no partitions":                {nil, false},
		"all read and finished":        {[]actors.PartitionState{done, done}, true},
		"one with lag":                 {[]actors.PartitionState{done, {HighWatermark: 10, Committed: 7}}, false},
		"one with a record in flight":  {[]actors.PartitionState{done, {HighWatermark: 10, Committed: 10, InFlight: 1}}, false},
		"high watermark not seen yet":  {[]actors.PartitionState{done, {Committed: -1, Start: -2}}, false},
		"empty partition, settled":     {[]actors.PartitionState{done, {Committed: -1, Start: -2, Settled: true}}, true},
		"claimed at its end, no marks": {[]actors.PartitionState{{HighWatermark: 5, Committed: -1, Start: 5}}, true},
	} {
		if got := caughtUp(c.parts); got != c.want {
			t.Errorf("%s: caughtUp = %v, want %v", name, got, c.want)
		}
	}
}

// A progress line only when something changed since the last one.
func TestProgressSkipsUnchangedLines(t *testing.T) {
	at := time.Unix(1000, 0)
	p := progress{lastAt: at}
	v := view{stats: actors.StatsSnapshot{Succeeded: 100, InFlight: 4}, limit: 32, partitions: 8, lag: 50}
	attrs := p.step(at.Add(10*time.Second), v)
	if attrs == nil {
		t.Fatal("no line after 100 records")
	}
	got := map[any]any{}
	for i := 0; i+1 < len(attrs); i += 2 {
		got[attrs[i]] = attrs[i+1]
	}
	if got["lag"] != int64(50) || got["records_per_second"] != int64(10) || got["partitions"] != 8 {
		t.Fatalf("line %v; want lag 50, 10 records/s, 8 partitions", attrs)
	}
	if attrs := p.step(at.Add(20*time.Second), v); attrs != nil {
		t.Fatalf("line %v when nothing changed", attrs)
	}
	v.lag = 0
	if attrs := p.step(at.Add(30*time.Second), v); attrs == nil {
		t.Fatal("no line when only the lag changed")
	}
}

// "caught up" once when it happens; "behind" only after behindAfter without
// being caught up, so a stream read as fast as it arrives does not flap.
func TestCatchUpHysteresis(t *testing.T) {
	at := time.Unix(1000, 0)
	var c catchUp
	steps := []struct {
		after time.Duration
		up    bool
		want  string
	}{
		{0, false, ""},
		{time.Second, true, "caught up"},
		{2 * time.Second, true, ""},
		{3 * time.Second, false, ""},
		{4 * time.Second, true, ""}, // behind for a second: not said
		{5 * time.Second, false, ""},
		{5*time.Second + behindAfter - time.Millisecond, false, ""},
		{5*time.Second + behindAfter, false, "behind"},
		{6*time.Second + behindAfter, false, ""},
		{7*time.Second + behindAfter, true, "caught up"},
	}
	for i, s := range steps {
		if got := c.step(at.Add(s.after), s.up); got != s.want {
			t.Fatalf("step %d (+%v, up %v) = %q, want %q", i, s.after, s.up, got, s.want)
		}
	}
}

// One warning per dependency per troubleEvery, counting every failure and
// each record once since the previous; a recovery line after troubleQuiet
// without failures; a record's own failures never warn.
func TestTroubleWatch(t *testing.T) {
	at := time.Unix(1000, 0)
	var w troubleWatch
	db := func(attempts, shared int64, records ...string) []actors.DependencyFailures {
		return []actors.DependencyFailures{{Dependency: "database", Attempts: attempts, Shared: shared, Records: records, LastError: "connection refused"}}
	}
	lines := w.step(at, db(3, 3, "t/0@1", "t/0@2", "t/1@7"))
	if len(lines) != 1 || !lines[0].warn || lines[0].Dependency != "database" || lines[0].records != 3 || lines[0].Attempts != 3 ||
		lines[0].LastError != "connection refused" {
		t.Fatalf("first failures: %+v; want one warning of 3 records, 3 attempts", lines)
	}
	for s := 1; s < int(troubleEvery/time.Second); s++ {
		if lines := w.step(at.Add(time.Duration(s)*time.Second), db(2, 2, "t/0@1", "t/0@9")); len(lines) != 0 {
			t.Fatalf("second %d: %+v; want nothing within troubleEvery of the warning", s, lines)
		}
	}
	lines = w.step(at.Add(troubleEvery), db(1, 1, "t/0@1"))
	n := int64(troubleEvery/time.Second) - 1
	if len(lines) != 1 || !lines[0].warn || lines[0].Attempts != 2*n+1 || lines[0].records != 2 || lines[0].over != troubleEvery {
		t.Fatalf("after troubleEvery: %+v; want one warning of %d attempts, 2 records, over %v", lines, 2*n+1, troubleEvery)
	}
	if lines := w.step(at.Add(troubleEvery+troubleQuiet-time.Second), nil); len(lines) != 0 {
		t.Fatalf("quiet for less than troubleQuiet: %+v", lines)
	}
	lines = w.step(at.Add(troubleEvery+troubleQuiet), nil)
	if len(lines) != 1 || lines[0].warn || lines[0].Dependency != "database" {
		t.Fatalf("after troubleQuiet: %+v; want the recovery", lines)
	}
	if lines := w.step(at.Add(troubleEvery+2*troubleQuiet), nil); len(lines) != 0 {
		t.Fatalf("recovery said twice: %+v", lines)
	}

	var own troubleWatch
	for s := range 30 {
		f := []actors.DependencyFailures{{Dependency: "vmaas", Attempts: 1, Records: []string{"t/0@5"}}}
		if lines := own.step(at.Add(time.Duration(s)*time.Second), f); len(lines) != 0 {
			t.Fatalf("own failures warned: %+v", lines)
		}
	}
}
