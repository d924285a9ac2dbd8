package persistence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/internal/redact"
	"github.com/patchflow/patchflow/messages"
)

// Outbox is the relay's side of the outbox: it claims waiting messages,
// deletes the published ones and reports the backlog, on a pool of its own
// (outboxConns connections), apart from the records' pool and the health
// check, so that publishing never waits for a record's connection nor a
// record for the relay's.
type Outbox struct {
	db      *sql.DB
	url     string
	secrets []string
	// ids names the dictionary ids of remediations written by reference
	// (the store's cache: it learns them as the writers resolve them).
	ids *idCache
	// notify is set by NotifySoon and sent by notifier.
	notify atomic.Bool
	stop   chan struct{}
	ended  chan struct{}
}

// notifyEvery is how often, at most, an Outbox sends NotifySoon's NOTIFY.
const notifyEvery = 100 * time.Millisecond

// outboxConns is the relay's pool: a claim's transaction, the backlog's
// query and the notifier's NOTIFY beside it.
const outboxConns = 3

// outboxLockClass names the advisory locks the relay takes per ordering
// key (the second key is a hash of it), apart from hostLockClass's.
const outboxLockClass = 1885693543

// OpenOutbox opens the relay's pool on the store's database.
func (s *Store) OpenOutbox() (*Outbox, error) {
	db, err := openPool(s.url, 0, nil)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("database url: %w", err), s.secrets)
	}
	db.SetMaxOpenConns(outboxConns)
	db.SetMaxIdleConns(outboxConns)
	db.SetConnMaxLifetime(30 * time.Minute)
	o := &Outbox{db: db, url: s.url, secrets: s.secrets, ids: s.ids, stop: make(chan struct{}), ended: make(chan struct{})}
	go o.notifier()
	return o, nil
}

// Close stops the notifier and closes the relay's pool.
func (o *Outbox) Close() error {
	close(o.stop)
	<-o.ended
	return o.db.Close()
}

// NotifySoon asks for a NOTIFY on OutboxChannel within notifyEvery, sent
// on the relay's pool outside any record's transaction: the other
// replicas' relays (LISTEN) wake for what this process wrote, and however
// many commits ask, one NOTIFY goes per notifyEvery.
func (o *Outbox) NotifySoon() { o.notify.Store(true) }

func (o *Outbox) notifier() {
	defer close(o.ended)
	t := time.NewTicker(notifyEvery)
	defer t.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-t.C:
		}
		if !o.notify.Swap(false) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = o.db.ExecContext(ctx, `SELECT pg_notify('`+OutboxChannel+`', '')`) // the relays' timers cover a lost one
		cancel()
	}
}

// claimKeys looks at a window of the outbox: the $1 messages after the
// oldest $4, skipping kinds $3 and refused messages. It tries each of their
// ordering keys' advisory locks, taking those no other relay holds until
// the claim's transaction ends, and returns each key with whether it was
// taken, and the window's size. A key another relay holds is skipped whole,
// so a key's messages are published by one relay at a time, in id order.
const claimKeys = `
	SELECT k, pg_try_advisory_xact_lock($2, hashtext(k)), n FROM (
		SELECT DISTINCT ordering_key AS k, count(*) OVER () AS n FROM (
			SELECT ordering_key FROM outbox WHERE kind <> ALL ($3::text[]) AND refused IS NULL ORDER BY id LIMIT $1 OFFSET $4) c) d`

// claimWindows bounds how many windows of max messages a claim looks at:
// while another relay holds keys of the oldest messages, a claim looks
// past them, so that it still fills its batch (a round left short waits
// the relay's linger) without reading the whole outbox.
const claimWindows = 4

// claimMessages reads the locked keys' messages, oldest first, in a
// statement that starts after the locks are held: its snapshot sees what a
// relay that held a key before committed (it released the lock only then),
// so no message it deleted, nor an older version of a replaced one, is
// published again after a newer one. The server's start time is for the
// names of remediations written by reference (Outbox.renderClaimed).
const claimMessages = `
	SELECT id, kind, ordering_key, message_key, event_id::text, payload, created_at, pg_postmaster_start_time()
	FROM outbox WHERE ordering_key = ANY ($1::text[]) AND kind <> ALL ($3::text[]) AND refused IS NULL ORDER BY id LIMIT $2`

// rowLockIdle bounds how long the claim's session may sit idle once its
// DELETE holds row locks (a host's next remediation upserts its row): a
// relay cut off between its DELETE and its COMMIT frees them after this.
const rowLockIdle = "5s"

// Claim takes up to max of the oldest messages not of the kinds exclude,
// every message of a key in id order, and holds their keys from other
// relays until finish is called. finish deletes the messages the outcome
// says were published and keeps the refused ones aside, and ends the
// claim; it must be called once whenever Claim returned no error. A
// remediation written by reference that cannot be rendered is kept aside
// by Claim itself, at once, and left out of the messages it returns.
//
// Every statement of the claim, its BEGIN and its COMMIT included, returns
// by its call's context (ctx for Claim's, finish's own for finish's): the
// transaction is driven by hand on the connection, each statement guarded,
// and a connection left in doubt is discarded, never given back. While the
// relay publishes, the transaction holds advisory locks only, which no
// writer takes, so the session's idle-in-transaction timeout is lifted for
// it; from the DELETE on it holds row locks and the timeout is rowLockIdle.
func (o *Outbox) Claim(ctx context.Context, max int, exclude []messages.OutboxKind) ([]messages.OutboxMessage, func(ctx context.Context, outcome messages.OutboxOutcome) error, error) {
	conn, err := o.db.Conn(ctx)
	if err != nil {
		return nil, nil, o.error("claim outbox", err)
	}
	discard := func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
	}
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		discard()
		return nil, nil, o.error("claim outbox: begin", err)
	}
	done := false
	end := func(ctx context.Context, outcome messages.OutboxOutcome) error {
		if done {
			return errors.New("outbox claim ended twice")
		}
		done = true
		if len(outcome.Published) == 0 && len(outcome.Refused) == 0 {
			if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
				discard()
				return o.error("end outbox claim", err)
			}
			return conn.Close()
		}
		err := o.settle(ctx, conn, outcome)
		if err == nil {
			_, err = conn.ExecContext(ctx, `COMMIT`)
		}
		if err != nil {
			discard()
			return o.error("delete published outbox messages", err)
		}
		return conn.Close()
	}
	fail := func(what string, err error) ([]messages.OutboxMessage, func(context.Context, messages.OutboxOutcome) error, error) {
		discard()
		return nil, nil, o.error(what, err)
	}
	if _, err := conn.ExecContext(ctx, `SET LOCAL idle_in_transaction_session_timeout = 0`); err != nil {
		return fail("claim outbox", err)
	}
	kinds := make([]string, 0, len(exclude)+1)
	for _, k := range exclude {
		kinds = append(kinds, string(k))
		if k == messages.OutboxRemediation {
			kinds = append(kinds, outboxRemediationIDs)
		}
	}
	keys, err := o.keys(ctx, conn, max, kinds)
	if err != nil {
		return fail("claim outbox keys", err)
	}
	if len(keys) == 0 {
		return nil, end, nil
	}
	msgs, err := o.read(ctx, conn, keys, max, kinds)
	if err != nil {
		return fail("claim outbox messages", err)
	}
	return msgs, end, nil
}

// settle deletes the published messages and marks the refused ones, in the
// claim's transaction, once row locks are bounded by rowLockIdle.
func (o *Outbox) settle(ctx context.Context, conn *sql.Conn, outcome messages.OutboxOutcome) error {
	if _, err := conn.ExecContext(ctx, `SET LOCAL idle_in_transaction_session_timeout = '`+rowLockIdle+`'`); err != nil {
		return err
	}
	if len(outcome.Published) > 0 {
		if _, err := conn.ExecContext(ctx, `DELETE FROM outbox WHERE id = ANY ($1::bigint[])`, pq.Array(outcome.Published)); err != nil {
			return err
		}
	}
	if len(outcome.Refused) > 0 {
		if _, err := conn.ExecContext(ctx, markRefused, refusedArgs(outcome.Refused)...); err != nil {
			return err
		}
	}
	return nil
}

// markRefused keeps messages aside with their reasons ($1 the ids, $2 the
// reasons: refusedArgs).
const markRefused = `UPDATE outbox o SET refused = r.why FROM unnest($1::bigint[], $2::text[]) AS r (id, why) WHERE o.id = r.id`

func refusedArgs(refused map[int64]string) []any {
	ids := make([]int64, 0, len(refused))
	reasons := make([]string, 0, len(refused))
	for id, why := range refused {
		ids, reasons = append(ids, id), append(reasons, why)
	}
	return []any{pq.Array(ids), pq.Array(reasons)}
}

func (o *Outbox) keys(ctx context.Context, conn *sql.Conn, max int, kinds []string) ([]string, error) {
	var keys []string
	for w := range claimWindows {
		rows, err := conn.QueryContext(ctx, claimKeys, max, outboxLockClass, pq.Array(kinds), w*max)
		if err != nil {
			return nil, err
		}
		size, held := 0, false // size stays 0 for an empty window
		for rows.Next() {
			var (
				k     string
				taken bool
			)
			if err := rows.Scan(&k, &taken, &size); err != nil {
				rows.Close()
				return nil, err
			}
			if taken {
				keys = append(keys, k)
			} else {
				held = true
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
		// The next window only when this one was full and another relay
		// held some of it: otherwise this window fills the batch, or the
		// outbox ends here.
		if size < max || !held {
			break
		}
	}
	return keys, nil
}

func (o *Outbox) read(ctx context.Context, conn *sql.Conn, keys []string, max int, kinds []string) ([]messages.OutboxMessage, error) {
	rows, err := conn.QueryContext(ctx, claimMessages, pq.Array(keys), max, pq.Array(kinds))
	if err != nil {
		return nil, err
	}
	var (
		msgs    []messages.OutboxMessage
		byRef   []int // msgs' indexes of remediations written by reference
		refs    []remediationIDs
		bad     = map[int64]string{} // rows kept aside, with why
		started time.Time
	)
	for rows.Next() {
		var (
			m       messages.OutboxMessage
			kind    string
			key     sql.NullString
			payload string
		)
		if err := rows.Scan(&m.ID, &kind, &m.OrderingKey, &key, &m.EventID, &payload, &m.Created, &started); err != nil {
			rows.Close()
			return nil, err
		}
		m.Kind, m.Value = messages.OutboxKind(kind), []byte(payload)
		if key.Valid {
			m.Key = []byte(key.String)
		}
		// A writer of schema 5 replacing a row by reference writes a
		// whole message and leaves the kind.
		if kind == outboxRemediationIDs {
			m.Kind = messages.OutboxRemediation
			if !strings.HasPrefix(payload, "{") {
				r, err := decodeRemediationIDs(payload)
				if err != nil {
					bad[m.ID] = fmt.Sprintf("unreadable remediation state: %v", err)
					continue
				}
				byRef, refs = append(byRef, len(msgs)), append(refs, r)
			}
		}
		msgs = append(msgs, m)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, err
	}
	if len(byRef) > 0 {
		claimed := make([]claimedRemediation, len(byRef))
		for i, at := range byRef {
			claimed[i] = claimedRemediation{msg: &msgs[at], ids: refs[i]}
		}
		unrendered, err := o.renderClaimed(ctx, conn, claimed, started)
		if err != nil {
			return nil, err
		}
		maps.Copy(bad, unrendered)
	}
	if len(bad) == 0 {
		return msgs, nil
	}
	if err := o.setAside(ctx, bad); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(msgs, func(m messages.OutboxMessage) bool { _, ok := bad[m.ID]; return ok }), nil
}

// setAside keeps rows the relay cannot publish aside for a person, as
// refused (outbox.refused, the backlog's Refused), in a transaction of
// their own: the claim's commits only what it published.
func (o *Outbox) setAside(ctx context.Context, bad map[int64]string) error {
	_, err := o.db.ExecContext(ctx, markRefused, refusedArgs(bad)...)
	return err
}

// Backlog reports how many messages wait and the oldest one's age.
func (o *Outbox) Backlog(ctx context.Context) (messages.OutboxBacklog, error) {
	var (
		b      messages.OutboxBacklog
		oldest float64
	)
	err := o.db.QueryRowContext(ctx, `
		SELECT count(*) FILTER (WHERE refused IS NULL),
			COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at) FILTER (WHERE refused IS NULL)), 0)::float8,
			count(*) FILTER (WHERE refused IS NOT NULL)
		FROM outbox`).Scan(&b.Pending, &oldest, &b.Refused)
	if err != nil {
		return b, o.error("outbox backlog", err)
	}
	b.Oldest = time.Duration(max(oldest, 0) * float64(time.Second))
	return b, nil
}

// Listen wakes the relay: wake receives a value when a process notifies
// OutboxChannel after commits that wrote to the outbox (NotifySoon), and when the
// listening connection is lost or comes back (a notification may have been
// missed meanwhile). The relay's timer covers what LISTEN cannot see. stop
// ends it.
func (o *Outbox) Listen(problem func(error)) (wake <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	poke := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	l := pq.NewDialListener(newDialer(), o.url, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
		if err != nil && problem != nil {
			problem(redact.Error(err, o.secrets))
		}
		poke()
	})
	if err := l.Listen(OutboxChannel); err != nil && problem != nil {
		problem(redact.Error(err, o.secrets))
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-l.Notify:
				poke()
			}
		}
	}()
	return ch, func() {
		close(done)
		_ = l.Close()
	}
}

func (o *Outbox) error(what string, err error) error {
	if err == nil {
		return nil
	}
	return classify(redact.Error(fmt.Errorf("%s: %w", what, err), o.secrets))
}
