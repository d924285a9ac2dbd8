package persistence_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
)

func bigOutboxPayload(key string) string {
	return `{"host_id":"` + key + `","issues":["` + strings.Repeat(`patch:kernel-0:5.14.0-70.el9.x86_64","`, 400) + `x"]}`
}

func insertOutboxRow(t *testing.T, db *sql.DB, key string) {
	t.Helper()
	if _, err := db.Exec(`INSERT INTO outbox (kind, ordering_key, message_key, payload) VALUES ('payload_status', $1, $1, $2)`, key, bigOutboxPayload(key)); err != nil {
		t.Fatal(err)
	}
}

func payloadCompressionOf(t *testing.T, db *sql.DB, key string) string {
	t.Helper()
	var m sql.NullString
	if err := db.QueryRow(`SELECT pg_column_compression(payload) FROM outbox WHERE ordering_key = $1`, key).Scan(&m); err != nil {
		t.Fatal(err)
	}
	return m.String
}

// Migration 5 up and down with messages waiting in the outbox, one relay
// claim open across the migration: the relay reads every message, written
// before and after, whole; nothing is lost or duplicated.
func TestMigrationFiveWithMessagesWaitingAndAClaimOpen(t *testing.T) {
	s := openStore(t)
	db := s.DB()
	ctx := context.Background()
	if err := persistence.MigrateTo(db, 4); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		insertOutboxRow(t, db, fmt.Sprintf("before-%d", i))
	}
	o, err := s.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	msgs, finish, err := o.Claim(ctx, 2, nil)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("claim: %d, %v", len(msgs), err)
	}
	migrated := make(chan error, 1)
	start := time.Now()
	go func() { migrated <- persistence.MigrateTo(db, 5) }()
	// what lock does the migration wait for?
	time.Sleep(300 * time.Millisecond)
	var waiting []string
	rows, err := db.Query(`SELECT mode FROM pg_locks WHERE relation = 'outbox'::regclass AND NOT granted`)
	if err == nil {
		for rows.Next() {
			var m string
			_ = rows.Scan(&m)
			waiting = append(waiting, m)
		}
		rows.Close()
	}
	t.Logf("locks waited for on outbox while a claim is open: %v", waiting)
	for _, m := range msgs {
		if string(m.Value) != bigOutboxPayload(m.OrderingKey) {
			t.Fatalf("message %d read back wrong", m.ID)
		}
	}
	if err := finish(ctx, messages.OutboxOutcome{Published: []int64{msgs[0].ID, msgs[1].ID}}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-migrated:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("migration 5 did not finish within 30 s of the claim's end")
	}
	t.Logf("migration 5 took %v (a claim open for the first 300 ms)", time.Since(start))
	for i := range 5 {
		insertOutboxRow(t, db, fmt.Sprintf("after-%d", i))
	}
	if m := payloadCompressionOf(t, db, "after-0"); m != "lz4" {
		t.Logf("after-0 compressed with %q (server without lz4?)", m)
	}
	if m := payloadCompressionOf(t, db, "before-4"); m != "pglz" {
		t.Errorf("before-4 compressed with %q, want pglz", m)
	}
	// down with lz4 rows waiting, then more rows, then up again
	if err := persistence.MigrateTo(db, 4); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		insertOutboxRow(t, db, fmt.Sprintf("down-%d", i))
	}
	if m := payloadCompressionOf(t, db, "down-0"); m != "pglz" {
		t.Errorf("down-0 compressed with %q after migrating down, want pglz", m)
	}
	if err := persistence.MigrateTo(db, 5); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for round := 0; round < 20; round++ {
		msgs, finish, err := o.Claim(ctx, 4, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, m := range msgs {
			if string(m.Value) != bigOutboxPayload(m.OrderingKey) {
				t.Fatalf("message %d (%s) read back wrong: %d bytes", m.ID, m.OrderingKey, len(m.Value))
			}
			seen[m.OrderingKey]++
			ids = append(ids, m.ID)
		}
		if err := finish(ctx, messages.OutboxOutcome{Published: ids}); err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
	}
	if len(seen) != 3+5+3 { // 2 of "before" were published in the first claim
		t.Fatalf("read %d keys after the migrations, want 11: %v", len(seen), seen)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s read %d times", k, n)
		}
	}
}

// While another replica's relay holds the key of the oldest messages, a
// claim looks past them and fills its batch with the messages behind, so
// its round is full and the next starts at once: the backlog does not wait
// a linger per round while commits keep waking the relay. (Before, the
// claim looked at the oldest batch only, and with a linger of an hour 10 of
// the 30 waiting messages were published in 10 s.) Control: Linger 0.
func TestRelayFillsItsRoundPastAnotherRelaysKeys(t *testing.T) {
	for _, linger := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("linger=%v", linger), func(t *testing.T) {
			s := openStore(t)
			db := s.DB()
			ctx := context.Background()
			for range 10 {
				insertOutboxRow(t, db, "busy")
			}
			for i := range 30 {
				insertOutboxRow(t, db, fmt.Sprintf("k-%d", i))
			}
			other, err := s.OpenOutbox() // another replica's relay, mid-round on key busy
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			held, release, err := other.Claim(ctx, 1, nil)
			if err != nil || len(held) != 1 || held[0].OrderingKey != "busy" {
				t.Fatalf("other relay's claim: %+v %v", held, err)
			}
			defer release(ctx, messages.OutboxOutcome{})
			mine, err := s.OpenOutbox()
			if err != nil {
				t.Fatal(err)
			}
			defer mine.Close()
			p := &keyLogPublisher{}
			system := actors.NewActorSystem(slog.New(slog.DiscardHandler))
			defer system.Shutdown()
			r, err := actors.StartRelay(system, actors.RelayConfig{Store: mine, Publisher: p, Interval: time.Hour, Batch: 20, Linger: linger})
			if err != nil {
				t.Fatal(err)
			}
			stopWriting := make(chan struct{})
			wrote := make(chan struct{})
			go func() { // commits keep coming, each waking the relay
				defer close(wrote)
				for i := 0; ; i++ {
					select {
					case <-stopWriting:
						return
					case <-time.After(5 * time.Millisecond):
					}
					_, _ = db.Exec(`INSERT INTO outbox (kind, ordering_key, payload) VALUES ('payload_status', $1, '{}')`, fmt.Sprintf("w-%d", i))
					r.Wake()
				}
			}()
			deadline := time.Now().Add(10 * time.Second)
			for p.count("k-") < 30 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			close(stopWriting)
			<-wrote
			got := p.count("k-")
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := r.Stop(sctx); err != nil {
				t.Fatal(err)
			}
			if got < 30 {
				t.Fatalf("linger %v: %d of the 30 waiting messages published within 10 s while commits woke the relay every 5 ms (state %+v): rounds cut short by another relay's key waited the linger", linger, got, r.State())
			}
		})
	}
}

type keyLogPublisher struct {
	mu   sync.Mutex
	keys []string
}

func (p *keyLogPublisher) Publish(msgs []messages.OutboxMessage) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		p.keys = append(p.keys, m.OrderingKey)
	}
	return make([]error, len(msgs))
}

func (p *keyLogPublisher) count(prefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, k := range p.keys {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// While a relay's claim is open (its idle-in-transaction timeout lifted
// for the publish), migrations 5 and 6, up and down, wait for ACCESS
// EXCLUSIVE on outbox; were they to wait in one go, every record
// transaction's outbox write would queue behind them. They ask 100 ms at a
// time, and the relay's claim ends as it would have (before, migration 6
// down took weaker locks first and deadlocked with the claim's delete).
func TestOutboxMigrationsDoNotStallOutboxWritesBehindAClaim(t *testing.T) {
	for _, step := range []struct{ from, version uint }{{4, 5}, {5, 6}, {6, 5}} {
		version := step.version
		t.Run(fmt.Sprintf("migration %d to %d", step.from, version), func(t *testing.T) {
			s := openStore(t)
			db := s.DB()
			ctx := context.Background()
			if err := persistence.MigrateTo(db, step.from); err != nil {
				t.Fatal(err)
			}
			insertOutboxRow(t, db, "pending")
			o, err := s.OpenOutbox()
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			msgs, finish, err := o.Claim(ctx, 10, nil) // a relay publishing (up to the producer's bounds, 10 s and more)
			if err != nil || len(msgs) != 1 {
				t.Fatalf("claim: %d %v", len(msgs), err)
			}
			migrated := make(chan error, 1)
			go func() { migrated <- persistence.MigrateTo(db, version) }() // a new release starting
			time.Sleep(300 * time.Millisecond)
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			start := time.Now()
			_, werr := db.ExecContext(wctx, `INSERT INTO outbox (kind, ordering_key, payload) VALUES ('payload_status', 'record', '{}')`)
			cancel()
			took := time.Since(start)
			if err := finish(ctx, messages.OutboxOutcome{Published: []int64{msgs[0].ID}}); err != nil {
				t.Fatal(err)
			}
			if err := <-migrated; err != nil {
				t.Fatal(err)
			}
			if werr != nil {
				t.Fatalf("an outbox write during migration %d to %d, with a relay's claim open, waited %v and failed: %v", step.from, version, took.Round(time.Millisecond), werr)
			}
			if v, _, err := persistence.SchemaVersion(db); err != nil || v != version {
				t.Fatalf("schema version %d (%v), want %d", v, err, version)
			}
		})
	}
}
