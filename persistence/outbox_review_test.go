package persistence_test

// Regression tests from the adversarial review of the outbox: each broke
// one of the invariants of docs/architecture.md, "Effects: the outbox",
// before its fix, and describes the way it broke it.

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

func scratchWithParam(t *testing.T, dbURL, k, v string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

func scratchStatuses() []persistence.Message {
	return []persistence.Message{
		{EventID: "00000000-0000-4000-8000-000000000001", Value: []byte(`{"n":1}`)},
		{EventID: "00000000-0000-4000-8000-000000000002", Value: []byte(`{"n":2}`)},
	}
}

// Invariant 4; before the fix: the claim's advisory locks live as long as its session. The
// claim's transaction stays idle while the relay publishes (Publish waits
// for the broker, up to its retry budget); a session ended meanwhile
// (idle_in_transaction_session_timeout set in DATABASE_URL, which "wins"
// per docs/configuration.md and which the outbox pool inherits; or the
// role's/database's setting; a failover; pg_terminate_backend) releases
// the locks, and a second relay claims and publishes the same key while
// the first is still publishing it.
func TestAClaimKeepsItsLocksPastTheURLsIdleTimeout(t *testing.T) {
	ctx := context.Background()
	base := pgtest.URL(t)
	// Relay A's process: the pool's idle-in-transaction timeout given in DATABASE_URL.
	sa, err := persistence.Open(ctx, scratchWithParam(t, base, "idle_in_transaction_session_timeout", "300"), persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	sb, err := persistence.Open(ctx, base, persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sa.WritePayloadStatus(ctx, hostA, scratchStatuses()...); err != nil {
		t.Fatal(err)
	}
	a, err := sa.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sb.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	first, finishA, err := a.Claim(ctx, 10, nil)
	if err != nil || len(first) != 2 {
		t.Fatalf("relay A's claim: %v %+v", err, first)
	}
	time.Sleep(time.Second) // relay A publishes: Publish waits for the broker's answers
	second, finishB, err := b.Claim(ctx, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer finishB(ctx, messages.OutboxOutcome{}) //nolint:errcheck
	for _, m := range second {
		if m.OrderingKey == hostA {
			errA := finishA(ctx, messages.OutboxOutcome{Published: []int64{first[0].ID, first[1].ID}})
			t.Fatalf("relay B claimed host A's message %d (to publish it) while relay A, which claimed it, was still publishing it: A's claim session ended idle in transaction and its locks with it (A's finish afterwards: %v)", m.ID, errA)
		}
	}
	_ = finishA(ctx, messages.OutboxOutcome{})
}

// Invariant 6; before the fix: Claim began its transaction under context.WithoutCancel, so
// the guard (guardedConn) never watches its BEGIN, COMMIT nor ROLLBACK:
// against a server that stops answering (frozen host, dropped packets)
// they wait for ever, whatever the round's StoreTimeout. Here: finish(nil)
// (a ROLLBACK) under a 1 s context.
func TestAClaimEndsByItsContextOnAFrozenServer(t *testing.T) {
	ctx := context.Background()
	proxied, link := newFrozenLink(t, pgtest.URL(t))
	s, err := persistence.Open(ctx, proxied, persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WritePayloadStatus(ctx, hostA, scratchStatuses()...); err != nil {
		t.Fatal(err)
	}
	o, err := s.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	msgs, finish, err := o.Claim(ctx, 10, nil)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("claim: %v %+v", err, msgs)
	}
	link.freeze()
	defer link.thaw()
	done := make(chan error, 1)
	go func() {
		fctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		done <- finish(fctx, messages.OutboxOutcome{})
	}()
	select {
	case err := <-done:
		t.Logf("finish returned: %v", err)
	case <-time.After(6 * time.Second):
		t.Fatalf("finish (a ROLLBACK) under a 1 s context still waits 6 s later: the claim transaction's end is not bounded; the relay's round, its Stopping handler and Stop's poison wait with it")
	}
}

// Invariant 6, before the fix, the same at the start of a claim: a pooled connection's
// BEGIN is not watched either, so Claim waits for ever past its context.
func TestAClaimBeginsByItsContextOnAFrozenServer(t *testing.T) {
	ctx := context.Background()
	proxied, link := newFrozenLink(t, pgtest.URL(t))
	s, err := persistence.Open(ctx, proxied, persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o, err := s.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	// A first round leaves its connection idle in the relay's pool.
	_, finish, err := o.Claim(ctx, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := finish(ctx, messages.OutboxOutcome{}); err != nil {
		t.Fatal(err)
	}
	link.freeze()
	defer link.thaw()
	done := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, f, err := o.Claim(cctx, 10, nil)
		if f != nil {
			_ = f(cctx, messages.OutboxOutcome{})
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("claim returned: %v", err)
	case <-time.After(6 * time.Second):
		t.Fatalf("Claim under a 1 s context still waits 6 s later (its BEGIN is sent under context.WithoutCancel)")
	}
}

// Invariant 5 ("at most one pending per host"); before the fix: the ordering key was the
// event's inventory id as text, the host row's is a uuid: an event that
// spells the host's id in capitals (inventory.isUUID accepts A-F) updates
// the same host but writes its remediation under another ordering key
// (and Kafka key): two pending for one host, in no order between them.
func TestOneHostOnePendingRemediationWhateverItsIDsCase(t *testing.T) {
	s := openStore(t)
	upper := strings.ToUpper(hostA)
	storeWithEffects(t, s, upload(upper, t0, "bash"), withEffects(evaluation("RHSA-1", "installable"), upper, rem()))
	storeWithEffects(t, s, upload(hostA, t0.Add(time.Minute), "bash"), withEffects(evaluation("RHSA-2", "installable"), hostA, rem()))
	var hosts int
	if err := s.DB().QueryRow(`SELECT count(*) FROM system`).Scan(&hosts); err != nil {
		t.Fatal(err)
	}
	rem := ofKind(outboxRows(t, s), messages.OutboxRemediation)
	if hosts == 1 && len(rem) > 1 {
		t.Fatalf("one host, %d remediation messages pending: %+v", len(rem), rem)
	}
}

// Invariant 7; before the fix: writeEffects called pg_notify in every transaction that
// writes a message (with the payload tracker on: every upload). At commit
// PostgreSQL serialises notifying transactions on one database-wide lock
// (PreCommit_Notify: AccessExclusiveLock on the database object 0, "held
// till after commit"), from before the commit record until the end of the
// commit, WAL flush (and synchronous replication) included. One commit
// slow to finish therefore holds every other record's commit, of every
// partition and every replica, and in steady state commits no longer
// group. Here one record's commit waits (for a synchronous standby; in
// production, for its WAL flush) and another host's record, which waits
// for no standby, cannot commit: its write times out. A write without a
// message commits at once.
func TestAnOutboxCommitHoldsNoOtherWriter(t *testing.T) {
	ctx := context.Background()
	base := pgtest.URL(t)
	admin, err := sql.Open("postgres", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	slow, err := persistence.Open(ctx, scratchWithParam(t, base, "synchronous_commit", "on"), persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	other, err := persistence.Open(ctx, scratchWithParam(t, base, "synchronous_commit", "local"), persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := admin.Exec(`ALTER SYSTEM SET synchronous_standby_names = 'scratch_absent_standby'`); err != nil {
		t.Skipf("cannot set synchronous_standby_names: %v", err)
	}
	defer func() {
		_, _ = admin.Exec(`ALTER SYSTEM RESET synchronous_standby_names`)
		_, _ = admin.Exec(`SELECT pg_reload_conf()`)
	}()
	if _, err := admin.Exec(`SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	// A non-notifying write of the other store commits while the slow commit waits: control.
	slowCtx, cancelSlow := context.WithCancel(ctx)
	slowDone := make(chan error, 1)
	go func() { slowDone <- slow.WritePayloadStatus(slowCtx, hostA, scratchStatuses()...) }()
	defer func() { cancelSlow(); <-slowDone }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := admin.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow commit never waited for the standby")
		}
		time.Sleep(20 * time.Millisecond)
	}
	const hostB = "8a3f1c2e-0000-4000-8000-000000000002"
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := other.StoreSystem(cctx, upload(hostB, t0, "bash")); err != nil {
		t.Fatalf("control: a write without messages: %v", err)
	}
	start := time.Now()
	err = other.WritePayloadStatus(cctx, hostB, scratchStatuses()...)
	if err != nil {
		t.Fatalf("another host's record, waiting for no standby, could not commit its outbox write within 3 s (%v after %v): it waits for the notify lock held by the slow commit", err, time.Since(start).Round(time.Millisecond))
	}
}

// Invariant 7 (with 6); before the fix: the relay's claim held, from its DELETE to its
// COMMIT, row locks on the outbox rows it deletes, and a record storing a
// host's new remediation (remq's ON CONFLICT on the host's pending row)
// waits for them. The outbox's pool sets no
// idle_in_transaction_session_timeout (OpenOutbox: openPool(s.url, 0,
// nil)), unlike the records' pool, whose 5 s exists for exactly this ("a
// listener paused mid-transaction ... every other listener's writes wait
// behind it"), and the COMMIT itself is not bounded. Here the relay's
// requests stop reaching the server once its DELETE was answered (a
// one-way partition; a paused process is the same for the server): the
// server holds the session idle in transaction with the row locked, until
// its TCP keepalive gives up (hours by default), and the host's next
// record cannot store. The trigger only slows the DELETE so the link can
// be cut between it and the COMMIT.
func TestARelaysUnfinishedDeleteFreesTheRecordsWithinItsIdleBound(t *testing.T) {
	ctx := context.Background()
	base := pgtest.URL(t)
	proxied, link := newFrozenLink(t, base)
	relayStore, err := persistence.Open(ctx, proxied, persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer relayStore.Close()
	s, err := persistence.Open(ctx, base, persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.DB().Exec(`
		CREATE FUNCTION scratch_slow_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$;
		CREATE TRIGGER scratch_slow_delete AFTER DELETE ON outbox FOR EACH STATEMENT EXECUTE FUNCTION scratch_slow_delete();`); err != nil {
		t.Fatal(err)
	}
	storeWithEffects(t, s, upload(hostA, t0, "bash"), withEffects(evaluation("RHSA-1", "installable"), hostA, rem()))
	o, err := relayStore.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	msgs, finish, err := o.Claim(ctx, 10, []messages.OutboxKind{messages.OutboxNotification})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("claim: %v %+v", err, msgs)
	}
	go func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = finish(fctx, messages.OutboxOutcome{Published: []int64{msgs[0].ID}})
	}()
	time.Sleep(300 * time.Millisecond) // the DELETE runs; then nothing more reaches the server
	if _, err := link.proxy.Toxics.AddToxicJson(strings.NewReader(`{"name":"up","type":"timeout","stream":"upstream","toxicity":1,"attributes":{"timeout":0}}`)); err != nil {
		t.Fatal(err)
	}
	defer link.thaw()
	time.Sleep(2 * time.Second)
	// The host's next evaluation, with a new remediation.
	u := upload(hostA, t0.Add(time.Minute), "bash")
	check, err := s.CheckUpload(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	start := time.Now()
	_, err = s.StoreEvaluatedSystem(wctx, u, withEffects(evaluation("RHSA-2", "installable"), hostA, rem()), check)
	if err != nil {
		var state string
		_ = s.DB().QueryRow(`SELECT string_agg(state || ' ' || coalesce(wait_event, ''), '; ') FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&state)
		t.Fatalf("the host's next record could not store within 5 s (%v after %v): it waits for the row lock of the relay's DELETE, whose session waits idle in transaction for a COMMIT (sessions: %s)", err, time.Since(start).Round(time.Millisecond), state)
	}
}
