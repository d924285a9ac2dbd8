package persistence

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// schema5Remediation is how a writer of schema 5 writes a host's
// remediation message ($1 the host, $2 the message), as a rolling deploy
// runs it beside writers of schema 6.
const schema5Remediation = `
	INSERT INTO outbox (kind, ordering_key, message_key, payload) SELECT 'remediation', $1::text, $1::text, $2::text
	ON CONFLICT (ordering_key) WHERE kind = 'remediation' DO UPDATE SET id = nextval('outbox_id_seq'),
		payload = EXCLUDED.payload, event_id = EXCLUDED.event_id, created_at = EXCLUDED.created_at`

// Migration 6 keeps one pending remediation per host across a rolling
// deploy: a writer of schema 5 still finds its unique index, and replacing
// a row written by reference leaves a whole message the relay publishes as
// it is; a writer of schema 6 replaces a whole message pending from before.
// Its down migration keeps the whole messages and deletes what a relay of
// schema 5 could not read.
func TestMigrationToRemediationIDsKeepsOnePendingPerHost(t *testing.T) {
	url := pgtest.URL(t)
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	to := migrateStep(t, db)
	to(5)
	before := fmt.Sprintf(remediationHost, 1)
	if _, err := db.Exec(schema5Remediation, before, `{"host_id":"`+before+`","issues":["patch:written-by-schema-5"]}`); err != nil {
		t.Fatal(err)
	}
	to(6)
	s, err := Open(context.Background(), url, DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o, err := s.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	count := func(host string) (n int, kind string) {
		t.Helper()
		if err := db.QueryRow(`SELECT count(*), COALESCE(max(kind), '') FROM outbox WHERE ordering_key = $1`, host).Scan(&n, &kind); err != nil {
			t.Fatal(err)
		}
		return n, kind
	}

	storeRemediation(t, s, 1) // schema 6 over schema 5's pending message
	if n, kind := count(before); n != 1 || kind != outboxRemediationIDs {
		t.Fatalf("after a schema-6 write over a pending schema-5 message: %d rows, kind %s; want 1, %s", n, kind, outboxRemediationIDs)
	}
	after := fmt.Sprintf(remediationHost, 2)
	storeRemediation(t, s, 2)
	whole := `{"host_id":"` + after + `","issues":["patch:written-by-schema-5"]}`
	if _, err := db.Exec(schema5Remediation, after, whole); err != nil {
		t.Fatalf("a schema-5 write after migration 6: %v", err)
	}
	if n, _ := count(after); n != 1 {
		t.Fatalf("after a schema-5 write over a pending schema-6 one: %d rows, want 1", n)
	}
	got := map[string]string{}
	for _, m := range claimAll(t, o) {
		if m.Kind != messages.OutboxRemediation {
			t.Fatalf("claimed %+v as %s", m, m.Kind)
		}
		got[m.OrderingKey] = string(m.Value)
	}
	if got[before] != wantRemediation(1) || got[after] != whole || len(got) != 2 {
		t.Fatalf("claimed %q, want %s's rendered and %s's as schema 5 wrote it", got, before, after)
	}

	to(5)
	if n, _ := count(before); n != 0 {
		t.Fatalf("migrating down kept %d rows by reference, which a relay of schema 5 cannot read", n)
	}
	var states int
	if err := db.QueryRow(`SELECT count(*) FROM remediation_state r JOIN system s ON s.id = r.system_id WHERE s.inventory_id = $1`, before).Scan(&states); err != nil {
		t.Fatal(err)
	}
	if states != 0 {
		t.Fatal("migrating down kept the checksum of a deleted message: the host's next evaluation would write none")
	}
	if n, kind := count(after); n != 1 || kind != "remediation" {
		t.Fatalf("after migrating down, %s has %d rows of kind %s; want its whole message kept, as a remediation", after, n, kind)
	}
	if _, err := db.Exec(schema5Remediation, after, whole); err != nil {
		t.Fatalf("a schema-5 write after migrating down: %v", err)
	}
	if n, _ := count(after); n != 1 {
		t.Fatalf("after migrating down, a schema-5 write left %s with %d rows, want 1", after, n)
	}
}
