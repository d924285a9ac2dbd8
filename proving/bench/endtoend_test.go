package bench

import (
	"context"
	"database/sql"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/persistence/pgtest"
)

// buildMock builds cmd/platform-mock into dir.
func buildMock(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "platform-mock")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/patchflow/patchflow/cmd/platform-mock").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/platform-mock: %v\n%s", err, out)
	}
	return bin
}

// The end-to-end scenario runs the listener and the platform mock binaries
// in processes of their own on the in-process broker and the test
// PostgreSQL (the figures belong to `make bench`): it refuses a server that
// is not durable unless told otherwise, then measures new hosts and
// re-check-ins in a database of the listener's own, reads the listener's
// metrics and every process's CPU, checks every host, and drops its
// databases at the end.
func TestEndToEndProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the listener and platform mock binaries")
	}
	ctx := context.Background()
	admin := pgtest.URL(t)
	dir := t.TempDir()
	e := &EndToEnd{DatabaseURL: admin, Partitions: 4, MockBin: buildMock(t, dir), Work: t.TempDir()}
	bin := buildListener(t, dir)
	settings, err := ReadPostgresSettings(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	err = e.Prepare(ctx)
	switch {
	case settings.Durable() && err != nil:
		t.Fatalf("a durable server refused: %v", err)
	case !settings.Durable() && (err == nil || !strings.Contains(err.Error(), settings.NotDurable())):
		t.Fatalf("a server with %s: %v; want a refusal naming them", settings.NotDurable(), err)
	}
	_ = e.Close()
	e.AllowNotDurable = true
	if err := e.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	for _, c := range []EndToEndConfig{
		{Name: "default", Workload: WorkloadNewHosts, Events: 60, Hosts: 30},
		{Name: "default", Workload: WorkloadRecheck, Events: 60, Hosts: 20},
		{Name: "sequential", Workload: WorkloadNewHosts, PerPartition: 1, Total: 4, Ordering: "partition", Events: 16, Hosts: 8},
	} {
		res, err := e.Run(ctx, ListenerAfter, bin, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %s: %+v", c.Workload, c.Name, res)
		if res.Events != c.Events || res.HostsChecked != c.Hosts || res.HostsWrong != 0 || res.HandledTwice != 0 || !res.CommittedToEnd {
			t.Errorf("%s: %d events, %d of %d hosts wrong, %d handled twice, committed to end %v", c.Workload, res.Events, res.HostsWrong, res.HostsChecked, res.HandledTwice, res.CommittedToEnd)
		}
		if res.Publishable != settings.Durable() || res.Postgres.Fsync != settings.Fsync {
			t.Errorf("publishable %v with fsync %s", res.Publishable, res.Postgres.Fsync)
		}
		// Every event waits the mock's 100 ms for VMaaS.
		if res.PerSecond <= 0 || res.HandlerAttempts < int64(c.Events) || res.HandlerP50MS < 100 || res.HandlerP99MS < res.HandlerP50MS || res.VMaaSMS < 100 {
			t.Errorf("%s: %.1f events/s, %d attempts, p50 %.0f ms, p99 %.0f ms, VMaaS %.0f ms per event", c.Workload, res.PerSecond, res.HandlerAttempts, res.HandlerP50MS, res.HandlerP99MS, res.VMaaSMS)
		}
		if res.DatabaseMS <= 0 || res.VMaaSMS <= 0 {
			t.Errorf("database %.1f ms and VMaaS %.1f ms per event: the dependency histogram is not read", res.DatabaseMS, res.VMaaSMS)
		}
		if res.CPU.Listener <= 0 || res.CPU.Mock < 0 || res.CPU.Bench < 0 || res.CPU.Kafka != -1 || (e.postmaster > 0) != (res.CPU.Postgres > 0) {
			t.Errorf("CPU per event %+v (postmaster %d)", res.CPU, e.postmaster)
		}
		if c.PerPartition > 0 && (res.InFlightPerPartition != c.PerPartition || res.InFlightTotal != c.Total) || res.DBConnections <= 0 {
			t.Errorf("the listener's settings: S %d, G %d, %d connections", res.InFlightPerPartition, res.InFlightTotal, res.DBConnections)
		}
	}
	if e.postmaster == 0 {
		t.Log("the test PostgreSQL is not a process here: its CPU was not measured")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("postgres", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRow(`SELECT count(*) FROM pg_database WHERE datname LIKE 'patchflow_bench_%'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d of the scenario's databases left (%v)", left, err)
	}
}
