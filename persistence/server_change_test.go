package persistence_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// privateCluster is a PostgreSQL server of the test's own (.ci/postgres
// start), which the test may stop, restore from a copy of its data and
// start again; stopped and removed at the test's end.
type privateCluster struct {
	t      *testing.T
	script string
	dir    string
	url    string
}

func startPrivateCluster(t *testing.T) *privateCluster {
	t.Helper()
	pgtest.URL(t) // the suite's database rules: skip without one, unless required
	script, err := filepath.Abs(filepath.Join("..", ".ci", "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, "start")
	cmd.Env = append(os.Environ(), "PATCHFLOW_PG_DURABLE=")
	out, err := cmd.Output()
	if err != nil {
		// With a DATABASE_URL of its own, a machine may lack the server's
		// binaries; make test (PATCHFLOW_REQUIRE_DB=1) has them.
		if os.Getenv("PATCHFLOW_REQUIRE_DB") != "1" {
			t.Skipf("no cluster of the test's own (.ci/postgres start: %v)", err)
		}
		t.Fatalf("start a cluster of the test's own: %v", err)
	}
	c := &privateCluster{t: t, script: script, dir: strings.TrimSpace(string(out))}
	t.Cleanup(func() { _ = exec.Command(script, "stop", c.dir).Run() })
	url, err := os.ReadFile(filepath.Join(c.dir, "url"))
	if err != nil {
		t.Fatal(err)
	}
	c.url = strings.TrimSpace(string(url))
	return c
}

func (c *privateCluster) run(args ...string) {
	c.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		c.t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// backup copies the stopped server's data aside; restore puts that copy
// back, losing what was committed since, and starts the server.
func (c *privateCluster) backup() {
	c.run(c.script, "pause", c.dir)
	c.run("cp", "-a", filepath.Join(c.dir, "data"), filepath.Join(c.dir, "backup"))
	c.run(c.script, "resume", c.dir)
}

func (c *privateCluster) restore() {
	c.run(c.script, "pause", c.dir)
	c.run("rm", "-rf", filepath.Join(c.dir, "data"))
	c.run("cp", "-a", filepath.Join(c.dir, "backup"), filepath.Join(c.dir, "data"))
	c.run(c.script, "resume", c.dir)
}

// attempt stores u with e as the pipeline does after a failure: the upload
// checked again, then stored; a few tries, as the connections to a server
// that went away fail first.
func attempt(t *testing.T, s *persistence.Store, u persistence.SystemUpload, e persistence.Evaluation) {
	t.Helper()
	ctx := context.Background()
	var err error
	for range 10 {
		var check persistence.UploadCheck
		if check, err = s.CheckUpload(ctx, u); err == nil {
			if _, err = s.StoreEvaluatedSystem(ctx, u, e, check); err == nil {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("store %s: %v", u.InventoryID, err)
}

// A server restored from a physical backup (or a standby promoted before
// it had every commit) lacks rows whose ids the store cached. A write whose ids
// were resolved before the server changed (its upload checked, then its
// VMaaS call spanning the change) is refused and resolved again, so no
// host keeps an id of a row the server lost, nor, once the sequence hands
// that id out again, another advisory's.
func TestAWriteAfterARestoreCarriesNoIDOfTheLostRows(t *testing.T) {
	c := startPrivateCluster(t)
	ctx := context.Background()
	s, err := persistence.Open(ctx, c.url, persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const (
		hostB = "8a3f1c2e-0000-4000-8000-000000000002"
		hostC = "8a3f1c2e-0000-4000-8000-000000000003"
		hostD = "8a3f1c2e-0000-4000-8000-000000000004"
	)
	attempt(t, s, upload(hostA, t0, "bash"), evaluation("RHSA-1", "applicable"))
	c.backup()
	attempt(t, s, upload(hostB, t0, "bash"), evaluation("RHSA-2", "applicable")) // RHSA-2's id cached
	uC, eC := upload(hostC, t0, "bash"), evaluation("RHSA-2", "applicable")
	checkC, err := s.CheckUpload(ctx, uC) // hostC checked, then its VMaaS call...
	if err != nil {
		t.Fatal(err)
	}
	c.restore() // ... spans the restore: RHSA-2 and hostB are gone
	// The pool reconnects (database/sql replaces connections that broke;
	// here, at once): hostC's store runs on a fresh connection to the new
	// server before any check of an upload has seen it.
	s.DB().SetMaxIdleConns(0)
	s.DB().SetMaxIdleConns(persistence.DefaultPoolSettings().MaxIdle)
	if _, err := s.StoreEvaluatedSystem(ctx, uC, eC, checkC); err != nil {
		attempt(t, s, uC, eC) // the pipeline's retry
	}
	attempt(t, s, upload(hostD, t0, "bash"), evaluation("RHSA-3", "applicable"))
	for host, want := range map[string]map[string]persistence.AdvisoryStatus{
		hostA: {"RHSA-1": persistence.Applicable},
		hostC: {"RHSA-2": persistence.Applicable},
		hostD: {"RHSA-3": persistence.Applicable},
	} {
		st, err := s.LoadSystem(ctx, "org-1", host)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if !reflect.DeepEqual(st.Advisories, want) {
			t.Errorf("%s after the restore: advisories %v, want %v", host, st.Advisories, want)
		}
	}
}
