package demo_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/persistence/pgtest"
	"github.com/patchflow/patchflow/proving/demo"
	"github.com/patchflow/patchflow/proving/platform"
)

// The demo runs end to end, small: it returns nil only when every host in
// the database matches the last event sent for it, every bad message was
// dead-lettered, every message to skip was skipped for its reason (not
// dead-lettered: the dead letters are exactly the bad messages), and every
// partition was committed to its end; in the main run and in both runs of
// the comparison. The producer stays within its lead of the committed
// offsets and the broker holds no more than the lead: the stream is seven
// times the lead.
func TestDemoEndToEnd(t *testing.T) {
	url := pgtest.URL(t)
	// A port of its own: the default 9000 may be held by a listener this
	// machine runs besides the test.
	env := map[string]string{"KAFKA_BROKERS": "embedded", "EMBEDDED_PARTITIONS": "4", "LISTENER_PROGRESS_INTERVAL": "0", "DATABASE_URL": url,
		"LISTENER_HTTP_ADDR": "127.0.0.1:0"}
	opts := demo.DefaultOptions()
	opts.Load.Hosts, opts.Load.Events, opts.Load.BadShare, opts.Load.SkipShare = 60, 400, 0.05, 0.05
	opts.Load.Shape = platform.ProfileShape{Packages: 40, Repos: 10}
	opts.Load.Bulk = false
	opts.Dataset = platform.DatasetSize{Packages: 400, Repos: 20, Advisories: 300}
	opts.VMaaSLatency = "fixed:5ms"
	opts.Lead, opts.CompareEvents = 60, 40
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	report, err := demo.Run(ctx, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, opts, &out, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{"0 missing, 0 wrong", "dead letters      20 written, 20 bad messages sent",
		"skipped           20 records, not dead-lettered; reporter not allowed 7 of 7 sent; excluded host type 7 of 7 sent; nothing to evaluate 6 of 6 sent\n",
		"; 6 without packages, 0 unevaluated)", " and 14 filtered out as expected", "committed to its end",
		"  comparison        44 messages each (40 events of 6 hosts, 40 packages and 10 repositories per profile, only what the listener reads), in turn",
		"(64 in flight per partition, 1024 in all, adaptive)", "; with the limit fixed at 1024, ", "one record at a time per partition", "concurrency adaptive\n"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("summary lacks %q:\n%s", want, out.String())
		}
	}
	t.Log(out.String())
	m := report.Main
	if m.Events != 440 || m.MaxLead < 1 || m.MaxLead > int64(opts.Lead) || m.MaxHeld < 1 || m.MaxHeld > int64(opts.Lead) {
		t.Fatalf("main run: %d events, producer at most %d ahead, broker held at most %d: want 440, and both within the lead of %d\n%s",
			m.Events, m.MaxLead, m.MaxHeld, opts.Lead, out.String())
	}
	if report.Pipeline == nil || report.Sequential == nil || report.Fixed == nil || report.Pipeline.Events != 44 || report.Sequential.Events != 44 || report.Fixed.Events != 44 {
		t.Fatalf("comparison runs %+v %+v %+v, want 44 events each", report.Pipeline, report.Sequential, report.Fixed)
	}
}
