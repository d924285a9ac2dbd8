package persistence

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// Every write that carries ids from the cache checks, in its transaction,
// that the server is the one they were resolved on. The cache is made to
// believe in another server (as after a failover no check of an upload
// has seen yet): each write path refuses, transiently, writing nothing,
// and its retry, with the ids read again, writes.
func TestEveryWritePathRefusesIDsOfAnotherServer(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	eval := Evaluation{Advisories: []AdvisoryResult{{Name: "RHSA-1", Type: "security", Status: Installable}}}
	up := func(host int, when time.Time) SystemUpload {
		return SystemUpload{OrgID: "org-1", InventoryID: fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", host), EventTime: when, LastUpload: when,
			Packages: []Package{{Name: "bash", EVRA: "0:5.1-1.x86_64"}}}
	}
	evaluated, err := s.StoreSystem(ctx, up(9, at)) // a host stored without its evaluation, for StoreEvaluation
	if err != nil {
		t.Fatal(err)
	}
	for _, known := range []int{2, 4} { // hosts stored before, for the update paths
		if _, err := s.StoreSystem(ctx, up(known, at)); err != nil {
			t.Fatal(err)
		}
	}
	paths := []struct {
		name  string
		write func() error
		wrote func() bool
	}{
		{"insert, evaluated", func() error {
			_, err := s.StoreEvaluatedSystem(ctx, up(1, at), eval, UploadCheck{Apply: true, absent: true})
			return err
		}, func() bool { return stored(t, s, 1, at) }},
		{"update, evaluated", func() error {
			_, err := s.StoreEvaluatedSystem(ctx, up(2, at.Add(time.Minute)), eval, UploadCheck{Apply: true})
			return err
		}, func() bool { return stored(t, s, 2, at.Add(time.Minute)) }},
		{"insert, profile", func() error {
			_, err := s.StoreSystem(ctx, up(3, at))
			return err
		}, func() bool { return stored(t, s, 3, at) }},
		{"update, profile", func() error {
			_, err := s.StoreSystem(ctx, up(4, at.Add(time.Minute)))
			return err
		}, func() bool { return stored(t, s, 4, at.Add(time.Minute)) }},
		{"evaluation", func() error {
			ok, err := s.StoreEvaluation(ctx, evaluated, eval)
			if err == nil && !ok {
				return errors.New("stored nothing")
			}
			return err
		}, func() bool {
			var n int
			if err := s.db.QueryRowContext(ctx, `SELECT cardinality(advisory_ids) FROM system WHERE id = $1`, evaluated.SystemID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		}},
	}
	// A system id read on another server: StoreEvaluation refuses it
	// (that server may have given it to another host), and stores with
	// the result the retry reads again.
	foreign := evaluated
	foreign.server = foreign.server.Add(-time.Hour)
	if ok, err := s.StoreEvaluation(ctx, foreign, eval); !errors.Is(err, errServerChanged) || ok {
		t.Fatalf("StoreEvaluation with a system id of another server: %v %v, want the transient %v", ok, err, errServerChanged)
	}
	if paths[4].wrote() {
		t.Fatal("StoreEvaluation with a system id of another server wrote")
	}
	for _, p := range paths {
		var started time.Time
		if err := s.db.QueryRowContext(ctx, `SELECT pg_postmaster_start_time()`).Scan(&started); err != nil {
			t.Fatal(err)
		}
		s.ids.seeServer(started.Add(-time.Hour)) // the cache's ids are another server's
		err := p.write()
		if !errors.Is(err, errServerChanged) || messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_TRANSIENT {
			t.Fatalf("%s with the ids of another server: %v, want the transient %v", p.name, err, errServerChanged)
		}
		if p.wrote() {
			t.Fatalf("%s with the ids of another server wrote", p.name)
		}
		if err := p.write(); err != nil {
			t.Fatalf("%s, the retry: %v", p.name, err)
		}
		if !p.wrote() {
			t.Fatalf("%s, the retry wrote nothing", p.name)
		}
	}
}

// stored says whether host n's upload at when is stored.
func stored(t *testing.T, s *Store, n int, when time.Time) bool {
	t.Helper()
	var last time.Time
	err := s.db.QueryRow(`SELECT last_event_time FROM system WHERE inventory_id = $1`, fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", n)).Scan(&last)
	if err != nil {
		return false
	}
	return last.Equal(when)
}

// An id is cached only if it was read from the server its event began
// resolving under and the cache was not emptied since; a write resolved
// before a change is refused, and so is an id read outside the cache (a
// system's) on another server.
func TestIDCacheKeepsOnlyIDsOfItsServer(t *testing.T) {
	c := newIDCache(10)
	older := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	newer := older.Add(time.Hour)
	c.seeServer(older)
	v := c.view()      // event A begins resolving on the old server
	c.seeServer(newer) // another event's check sees the new one
	c.cacheAdvisories(v, older, map[string]int32{"RHSA-1": 1})
	c.cachePackages(v, older, map[Package]int64{{Name: "bash", EVRA: "1"}: 7})
	if c.advisories.Len() != 0 || c.packages.Len() != 0 {
		t.Fatal("ids read from the old server were cached after the cache was emptied for the new one")
	}
	vB := c.view() // event B resolves under the new server, on a connection still open to the old one
	c.cacheAdvisories(vB, older, map[string]int32{"RHSA-OLD": 1})
	if c.advisories.Len() != 0 {
		t.Fatal("an id the old server gave was cached under the new one")
	}
	if err := c.confirm(v, newer); !errors.Is(err, errServerChanged) {
		t.Fatalf("a write resolved before the change, on the new server: %v, want %v", err, errServerChanged)
	}
	v = c.view()
	c.cacheAdvisories(v, newer, map[string]int32{"RHSA-1": 2})
	if c.advisories.Len() != 1 {
		t.Fatal("an id read from the new server was not cached")
	}
	if err := c.confirm(v, newer); err != nil {
		t.Fatalf("a write resolved on the new server, on it: %v", err)
	}
	if err := c.confirm(v, newer.Add(time.Hour)); !errors.Is(err, errServerChanged) || c.advisories.Len() != 0 {
		t.Fatalf("a write on a third server: %v, cache of %d advisories; want refused and emptied", err, c.advisories.Len())
	}
	if err := c.confirmRead(older, newer); !errors.Is(err, errServerChanged) {
		t.Fatalf("a system id of the old server used on the new one: %v, want %v", err, errServerChanged)
	}
	if err := c.confirmRead(newer, newer); err != nil {
		t.Fatalf("a system id of the server, on it: %v", err)
	}
}
