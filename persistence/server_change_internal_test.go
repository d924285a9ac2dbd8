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

// Each lookup caches what it read only under the server that answered:
// with the cache believing in another server, ids read from the real one,
// found or inserted, of every kind, are used but not cached.
func TestLookupsCacheOnlyTheirServersIDs(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.StoreEvaluatedSystem(ctx, SystemUpload{OrgID: "org-1", InventoryID: "8a3f1c2e-0000-4000-8000-000000000001",
		EventTime: time.Now(), LastUpload: time.Now(), Packages: []Package{{Name: "bash", EVRA: "0:1-1.x86_64"}}},
		Evaluation{Advisories: []AdvisoryResult{{Name: "RHSA-1", Type: "security", Status: Installable}}}, UploadCheck{Apply: true, absent: true}); err != nil {
		t.Fatal(err)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var started time.Time
	if err := conn.QueryRowContext(ctx, `SELECT pg_postmaster_start_time()`).Scan(&started); err != nil {
		t.Fatal(err)
	}
	for _, stored := range []bool{true, false} { // looked up, then inserted
		s.ids.seeServer(started.Add(-time.Hour)) // empties the cache: nothing to hit
		v := s.ids.view()
		org, pkg, adv := "org-1", Package{Name: "bash", EVRA: "0:1-1.x86_64"}, "RHSA-1"
		if !stored {
			org, pkg, adv = "org-2", Package{Name: "zsh", EVRA: "0:5-1.x86_64"}, "RHSA-2"
		}
		if _, err := s.ids.accountID(ctx, conn, v, org); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ids.packageIDs(ctx, conn, v, []Package{pkg}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ids.advisoryIDs(ctx, conn, v, []string{adv}, []string{"security"}); err != nil {
			t.Fatal(err)
		}
		if n := s.ids.accounts.Len() + s.ids.packages.Len() + s.ids.advisories.Len(); n != 0 {
			t.Fatalf("stored %v: %d ids read from the server cached under another one's view", stored, n)
		}
	}
	// Under the real server's view they are cached.
	s.ids.seeServer(started)
	v := s.ids.view()
	if _, err := s.ids.packageIDs(ctx, conn, v, []Package{{Name: "bash", EVRA: "0:1-1.x86_64"}}); err != nil {
		t.Fatal(err)
	}
	if s.ids.packages.Len() != 1 {
		t.Fatal("an id read from the view's server was not cached")
	}
}

// The results that name a system carry the server they were read on, and
// StoreEvaluation refuses a system id of another server also when that
// server has no such row.
func TestResultsCarryTheirServer(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var started time.Time
	if err := s.db.QueryRowContext(ctx, `SELECT pg_postmaster_start_time()`).Scan(&started); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	u := SystemUpload{OrgID: "org-1", InventoryID: "8a3f1c2e-0000-4000-8000-000000000001", EventTime: at, LastUpload: at,
		Packages: []Package{{Name: "bash", EVRA: "0:1-1.x86_64"}}}
	check := func(what string, res UploadResult, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.SystemID == 0 || !res.server.Equal(started) {
			t.Fatalf("%s: system %d read on the server started %v, want %v", what, res.SystemID, res.server, started)
		}
	}
	res, err := s.StoreSystem(ctx, u) // the insert
	check("insert", res, err)
	u.EventTime = at.Add(time.Minute)
	res, err = s.StoreSystem(ctx, u) // the update that commits by itself
	check("update", res, err)
	res, err = s.StoreSystem(ctx, u) // not newer: the transaction that decides
	check("decided", res, err)
	c, err := s.CheckUpload(ctx, u) // not newer, seen by the check
	check("checked", c.Result, err)
	gone := UploadResult{SystemID: 1 << 40, EventTime: at, server: started.Add(-time.Hour)}
	if ok, err := s.StoreEvaluation(ctx, gone, Evaluation{}); !errors.Is(err, errServerChanged) || ok {
		t.Fatalf("StoreEvaluation of a system id of another server that this one lacks: %v %v, want %v", ok, err, errServerChanged)
	}
}

// The update that commits by itself checks the server in its statement and
// the cache's generation before it: ids taken from a cache refilled from
// another server since the event's view are not written, though the
// connection is still on the view's server.
func TestTheUpdateRefusesIDsOfACacheRefilledSinceItsView(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	u := SystemUpload{OrgID: "org-1", InventoryID: "8a3f1c2e-0000-4000-8000-000000000001", EventTime: at, LastUpload: at,
		Packages: []Package{{Name: "bash", EVRA: "0:1-1.x86_64"}}}
	if _, err := s.StoreSystem(ctx, u); err != nil {
		t.Fatal(err)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	v := s.ids.view() // the event's view, on this server
	other := v.started.Add(time.Hour)
	s.ids.seeServer(other) // another event's check sees a new server, and caches its id
	zsh := Package{Name: "zsh", EVRA: "0:5-1.x86_64"}
	s.ids.cachePackages(s.ids.view(), other, map[Package]int64{zsh: 987654})
	u.EventTime, u.Packages = at.Add(time.Minute), []Package{zsh}
	pkgIDs, err := s.ids.packageIDs(ctx, conn, v, u.Packages)
	if err != nil || len(pkgIDs) != 1 || pkgIDs[0] != 987654 {
		t.Fatalf("the event took %v (%v) from the cache, want the other server's 987654", pkgIDs, err)
	}
	accountID, err := s.ids.accountID(ctx, conn, v, u.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	u.canonicalize()
	w := systemWrite{accountID: accountID, u: &u, sum: u.checksum(), pkgIDs: pkgIDs, ids: s.ids, view: v}
	id, err := w.updateIfNewer(ctx, conn)
	if !errors.Is(err, errServerChanged) || id != 0 {
		t.Fatalf("the update with ids of a cache refilled since its view: system %d, %v; want %v", id, err, errServerChanged)
	}
}

// A write learns its notified pairs only under the view it resolved its ids
// in: when the cache is emptied while the write runs (another event saw
// another server), the write still commits where its ids came from, but
// what it notified is not added to the emptied cache, which now answers
// for a server that may lack those rows. The same write without the purge
// teaches the cache its pairs. Both writes that store an evaluation:
// StoreEvaluatedSystem (the upload and its evaluation) and StoreEvaluation
// (the evaluation of an upload stored before).
func TestAWriteLearnsNoNotifiedPairsAfterAPurge(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Cleanup(func() { afterEffects = nil })
	next := newBenchHosts()
	writes := map[string]func(u SystemUpload, e Evaluation) error{
		"StoreEvaluatedSystem": func(u SystemUpload, e Evaluation) error {
			res, err := s.StoreEvaluatedSystem(ctx, u, e, UploadCheck{Apply: true, absent: true})
			if err == nil && !res.Applied {
				err = fmt.Errorf("not applied: %+v", res)
			}
			return err
		},
		"StoreEvaluation": func(u SystemUpload, e Evaluation) error {
			res, err := s.StoreSystem(ctx, u) // no evaluation, so no effects: the hook does not run
			if err != nil {
				return err
			}
			stored, err := s.StoreEvaluation(ctx, res, e)
			if err == nil && !stored {
				err = fmt.Errorf("not stored")
			}
			return err
		},
	}
	for name, write := range writes {
		store := func(purge bool) int {
			u, e := next()
			afterEffects = nil
			if purge {
				afterEffects = func() error {
					s.ids.seeServer(s.ids.view().started.Add(time.Hour))
					return nil
				}
			}
			if err := write(u, e); err != nil {
				t.Fatalf("%s (purge %v): %v", name, purge, err)
			}
			var account, notified int
			if err := s.db.QueryRowContext(ctx, `SELECT a.id, (SELECT count(*) FROM advisory_notified n WHERE n.account_id = a.id)
				FROM account a WHERE a.org_id = $1`, u.OrgID).Scan(&account, &notified); err != nil {
				t.Fatal(err)
			}
			if notified == 0 {
				t.Fatalf("%s notified nothing: the test needs a new org's first host", name)
			}
			return account
		}
		real := s.ids.view().started
		purged := store(true)
		if known := len(s.ids.notified.byAccount[purged]); known != 0 {
			t.Errorf("%s purged under: learnt %d notified pairs, want none", name, known)
		}
		s.ids.seeServer(real) // as the next event's first lookup would
		learnt := store(false)
		if known := len(s.ids.notified.byAccount[learnt]); known == 0 {
			t.Errorf("%s with no purge learnt no notified pairs", name)
		}
	}
}
