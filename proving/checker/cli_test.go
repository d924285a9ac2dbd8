package checker_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
	"github.com/patchflow/patchflow/proving/checker"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// The command reads the file loadgen -expected writes, reports a host the
// database lacks, and with -wait checks again until it arrives.
func TestRunWaitsForTheExpectedState(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s, err := persistence.Open(ctx, url, persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const seed = 7
	ds := platform.NewDataset(seed, platform.DefaultSize())
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	host := platform.HostID(seed, 0)
	path := filepath.Join(t.TempDir(), "expected.jsonl")
	plan := &loadgen.Plan{Expected: map[string]*loadgen.HostState{host: {HostID: host, OrgID: "org-1", Revision: 0, EventTime: at}}}
	if err := loadgen.WriteExpected(path, plan); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := checker.Parse([]string{"-database-url", url, "-expected", path, "-seed", "7",
		"-packages", "30", "-repos", "8"}, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	rep, err := checker.Run(ctx, cfg, s.DB(), &out)
	if err != nil || rep.OK() || rep.Missing != 1 || !strings.Contains(out.String(), host+": missing") {
		t.Fatalf("host not stored: report %v, err %v, output %q; want it missing", rep, err, out.String())
	}

	cfg.Wait = time.Minute
	type result struct {
		rep checker.Report
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	out.Reset()
	go func() {
		rep, err := checker.Run(ctx, cfg, s.DB(), &out)
		done <- result{rep, err, time.Now()}
	}()
	time.Sleep(1500 * time.Millisecond) // after Run's first check: it must check again
	stored := time.Now()
	store(t, s, ds, host, 0, at)
	r := <-done
	if r.err != nil || !r.rep.OK() || r.rep.Present != 1 {
		t.Fatalf("host stored while waiting: report %v, err %v, output %q", r.rep, r.err, out.String())
	}
	if r.at.Before(stored) {
		t.Fatalf("passed before the host was stored")
	}
}

// The database URL and the expected file are required, named as settings.
func TestParseRequiresDatabaseAndExpected(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	for args, want := range map[string]string{"": "DATABASE_URL", "-database-url postgres://u:p@h/db": "LOADGEN_EXPECTED"} {
		_, _, err := checker.Parse(strings.Fields(args), none)
		var se *settings.Error
		if !errors.As(err, &se) || se.Env != want {
			t.Errorf("args %q: error %v; want a settings error naming %s", args, err, want)
		}
	}
}
