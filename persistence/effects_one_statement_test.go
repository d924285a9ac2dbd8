package persistence_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// An upload that updates its host writes its effects in the update's own
// statement, which commits by itself: one round trip after the check, as
// without the effects, where a transaction around the update and the
// effects took four (BEGIN, the update, the effects, COMMIT). A new host's
// insert carries its effects likewise, in the transaction that holds the
// host's lock. Each of those statements is prepared: planned a few times
// on a connection however often it runs.
func TestAnUpdateWritesItsEffectsInItsOwnStatement(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := openOneConnection(t, url, true)
	db := openAdmin(t, url)
	const hosts = 30
	host := func(i int) string { return fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", i) }
	store := func(i, rev int, advisory string) {
		t.Helper()
		h := host(i)
		u := upload(h, t0.Add(time.Duration(rev)*time.Minute), "bash")
		res := storeWithEffects(t, s, u, withEffects(evaluation(advisory, "installable"), h, rem(), `{"status":"received"}`, `{"status":"success"}`))
		if !res.Applied {
			t.Fatalf("host %d revision %d not applied: %+v", i, rev, res)
		}
	}
	for i := range hosts {
		store(i, 0, "RHSA-1")
	}
	// Every advisory and package is known now: an update's event resolves
	// its ids from the cache and runs the check and its write alone.
	calls := func(like string) (calls, plans int64) {
		t.Helper()
		if err := db.QueryRowContext(ctx, `
			SELECT COALESCE(sum(calls), 0)::bigint, COALESCE(sum(plans), 0)::bigint FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query LIKE $1
				AND query NOT LIKE '%pg_stat_statements%'`, like).Scan(&calls, &plans); err != nil {
			t.Fatal(err)
		}
		return calls, plans
	}
	resetStatementStats(t, db)
	for i := range hosts {
		// Half the updates notify a new advisory, half do not: both forms.
		advisory := "RHSA-1"
		if i%2 == 0 {
			advisory = fmt.Sprintf("RHSA-%d", 100+i)
		}
		store(i, 1, advisory)
	}
	all, _ := calls(`%`)
	begins, _ := calls(`BEGIN%`)
	// Each event: the check, and its write; an update with a new advisory
	// also looks it up, and inserts it in a transaction of its own (BEGIN,
	// the insert, its lookup, COMMIT).
	newAdvisories := int64(hosts / 2)
	t.Logf("%d updates with effects, %d of them with a new advisory: %d statements, %d BEGIN", hosts, newAdvisories, all, begins)
	if begins > newAdvisories {
		t.Errorf("%d transactions begun for %d updates, %d of them with a new advisory to insert: an update's effects took a transaction of their own", begins, hosts, newAdvisories)
	}
	if want := 2*int64(hosts) + 5*newAdvisories; all > want {
		t.Errorf("%d statements for %d updates, want at most %d", all, hosts, want)
	}
	for _, form := range []string{"without", "with"} {
		like := `WITH s (id) AS (%UPDATE system SET display_name%`
		if form == "with" {
			like += `INSERT INTO advisory_notified%`
		}
		n, plans := calls(like)
		if form == "without" {
			with, withPlans := calls(like + `INSERT INTO advisory_notified%`)
			n, plans = n-with, plans-withPlans
		}
		if n != hosts/2 {
			t.Errorf("the update with its effects, %s the notification's parts, ran %d times, want %d", form, n, hosts/2)
		}
		if plans > 10 {
			t.Errorf("the update with its effects, %s the notification's parts, was planned %d times in %d calls on one connection: not prepared", form, plans, n)
		}
	}
	rows := outboxRows(t, s)
	if n := len(ofKind(rows, messages.OutboxPayloadStatus)); n != 4*hosts {
		t.Errorf("%d payload statuses in the outbox, want %d", n, 4*hosts)
	}
	if n := len(ofKind(rows, messages.OutboxNotification)); n != 1+hosts/2 {
		t.Errorf("%d notifications in the outbox, want %d", n, 1+hosts/2)
	}
	for i := range hosts {
		if st := load(t, s, host(i)); !st.LastEventTime.Equal(t0.Add(time.Minute)) {
			t.Fatalf("host %d: %+v", i, st)
		}
	}
}

// failOutboxCommitsSQL fails the commit of any transaction that wrote to
// the outbox while outbox_fail holds a row: a deferred trigger, so the
// failure comes after the outbox write and before the commit, whether the
// transaction is one statement's or a caller's.
const failOutboxCommitsSQL = `
	CREATE TABLE outbox_fail (on_ BOOLEAN);
	CREATE FUNCTION outbox_fail() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF EXISTS (SELECT 1 FROM outbox_fail) THEN
			RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = 'injected: the commit fails after the outbox write';
		END IF;
		RETURN NULL;
	END $$;
	CREATE CONSTRAINT TRIGGER outbox_fail AFTER INSERT OR UPDATE ON outbox DEFERRABLE INITIALLY DEFERRED
		FOR EACH ROW EXECUTE FUNCTION outbox_fail();`

// An update whose statement wrote its effects and then failed to commit
// leaves neither the update nor a message, and the retry writes both.
func TestAnUpdateAndItsEffectsCommitTogether(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := openOneConnection(t, url, true)
	db := openAdmin(t, url)
	e := withEffects(evaluation("RHSA-1", "installable"), hostA, rem(), `{"status":"received"}`, `{"status":"success"}`)
	storeWithEffects(t, s, upload(hostA, t0, "bash"), e)
	if _, err := db.ExecContext(ctx, `DELETE FROM outbox`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, failOutboxCommitsSQL); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO outbox_fail VALUES (true)`); err != nil {
		t.Fatal(err)
	}
	u := upload(hostA, t0.Add(time.Minute), "bash", "kernel")
	e2 := withEffects(evaluation("RHSA-2", "installable"), hostA, rem(), `{"status":"received"}`, `{"status":"success"}`)
	check, err := s.CheckUpload(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StoreEvaluatedSystem(ctx, u, e2, check); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("store: %v, want the injected failure", err)
	}
	if rows := outboxRows(t, s); len(rows) != 0 {
		t.Fatalf("a failed commit left %d outbox messages: %+v", len(rows), rows)
	}
	if st := load(t, s, hostA); !st.LastEventTime.Equal(t0) || len(st.Advisories) != 1 || st.Advisories["RHSA-1"] == "" {
		t.Fatalf("a failed commit left the update: %+v", st)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM outbox_fail`); err != nil {
		t.Fatal(err)
	}
	if res := storeWithEffects(t, s, u, e2); !res.Applied {
		t.Fatalf("the retry: %+v", res)
	}
	rows := outboxRows(t, s)
	if len(ofKind(rows, messages.OutboxRemediation)) != 1 || len(ofKind(rows, messages.OutboxNotification)) != 1 || len(ofKind(rows, messages.OutboxPayloadStatus)) != 2 {
		t.Fatalf("the retry wrote %+v", rows)
	}
	if ps := ofKind(rows, messages.OutboxPayloadStatus); string(ps[0].Value) != `{"status":"received"}` || ps[0].ID > ps[1].ID {
		t.Fatalf("the update's payload statuses out of order: %+v", ps)
	}
	if st := load(t, s, hostA); !st.LastEventTime.Equal(t0.Add(time.Minute)) || len(st.Advisories) != 1 || st.Advisories["RHSA-2"] == "" {
		t.Fatalf("the retry stored %+v", st)
	}
}
