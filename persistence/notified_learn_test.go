package persistence_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// A process that did not write an org's notified pairs (just started, or
// another replica's org) reads them once: an evaluation whose installable
// advisories the org was all notified of then leaves advisory_notified
// alone (its statement without the notification's parts), and one with a
// new advisory notifies that one only. The first evaluation runs while
// another session holds advisory_notified in SHARE mode, which lets reads
// through and stops every writer of the table: it fails if it takes the
// statement that inserts there.
func TestAFreshProcessLearnsWhatAnotherNotified(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	open := func() *persistence.Store {
		s, err := persistence.Open(ctx, url, persistence.DefaultPoolSettings())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	first := open()
	const hostB, hostC = "8a3f1c2e-0000-4000-8000-000000000002", "8a3f1c2e-0000-4000-8000-000000000003"
	storeWithEffects(t, first, upload(hostA, t0, "bash"), withEffects(evaluation("RHSA-1", "installable", "RHSA-2", "installable"), hostA, ""))

	fresh := open()
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, `LOCK TABLE advisory_notified IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	u := upload(hostB, t0, "bash")
	check, err := fresh.CheckUpload(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = fresh.StoreEvaluatedSystem(short, u, withEffects(evaluation("RHSA-1", "installable", "RHSA-2", "installable"), hostB, ""), check)
	cancel()
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("an evaluation of an org notified of all its advisories waited for advisory_notified's writers: %v", err)
	}

	storeWithEffects(t, fresh, upload(hostC, t0, "bash"), withEffects(evaluation("RHSA-1", "installable", "RHSA-3", "installable"), hostC, ""))
	var names [][]string
	for _, m := range ofKind(outboxRows(t, fresh), messages.OutboxNotification) {
		var n struct {
			Events []struct {
				Payload struct {
					AdvisoryName string `json:"advisory_name"`
				} `json:"payload"`
			} `json:"events"`
		}
		if err := json.Unmarshal(m.Value, &n); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range n.Events {
			got = append(got, ev.Payload.AdvisoryName)
		}
		names = append(names, got)
	}
	if len(names) != 2 || !slices.Equal(names[0], []string{"RHSA-1", "RHSA-2"}) || !slices.Equal(names[1], []string{"RHSA-3"}) {
		t.Fatalf("notifications %v, want [[RHSA-1 RHSA-2] [RHSA-3]]", names)
	}
}

// The same for an evaluation stored apart from its upload
// (StoreEvaluation): it learns the org's pairs in its transaction.
func TestAFreshProcessLearnsWhatAnotherNotifiedForAnEvaluationAlone(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	open := func() *persistence.Store {
		s, err := persistence.Open(ctx, url, persistence.DefaultPoolSettings())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	const hostB = "8a3f1c2e-0000-4000-8000-000000000002"
	storeWithEffects(t, open(), upload(hostA, t0, "bash"), withEffects(evaluation("RHSA-1", "installable"), hostA, ""))
	fresh := open()
	res, err := fresh.StoreSystem(ctx, upload(hostB, t0, "bash"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, `LOCK TABLE advisory_notified IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	e := withEffects(evaluation("RHSA-1", "installable"), hostB, "")
	e.Effects.OrgID = "org-1"
	ok, err := fresh.StoreEvaluation(short, res.SystemID, res.EventTime, e)
	cancel()
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err != nil || !ok {
		t.Fatalf("an evaluation of an org notified of all its advisories: stored %v, %v", ok, err)
	}
	if n := len(ofKind(outboxRows(t, fresh), messages.OutboxNotification)); n != 1 {
		t.Fatalf("%d notifications, want the first process's one", n)
	}
}
