package persistence

import (
	"context"
	"database/sql"
	"fmt"
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
}

// outboxConns is the relay's pool: a claim's transaction, and the backlog's
// query beside it.
const outboxConns = 2

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
	return &Outbox{db: db, url: s.url, secrets: s.secrets}, nil
}

// Close closes the relay's pool.
func (o *Outbox) Close() error { return o.db.Close() }

// claimKeys takes the ordering keys of the oldest $1 messages, skipping
// kinds $3, whose advisory lock no other relay holds, and locks them until
// the claim's transaction ends. A key another relay holds is skipped whole,
// so a key's messages are published by one relay at a time, in id order.
const claimKeys = `
	SELECT k FROM (
		SELECT DISTINCT ordering_key AS k FROM (
			SELECT ordering_key FROM outbox WHERE kind <> ALL ($3::text[]) ORDER BY id LIMIT $1) c) d
	WHERE pg_try_advisory_xact_lock($2, hashtext(k))`

// claimMessages reads the locked keys' messages, oldest first, in a
// statement that starts after the locks are held: its snapshot sees what a
// relay that held a key before committed (it released the lock only then),
// so no message it deleted, nor an older version of a replaced one, is
// published again after a newer one.
const claimMessages = `
	SELECT id, kind, ordering_key, message_key, event_id::text, payload, created_at
	FROM outbox WHERE ordering_key = ANY ($1::text[]) AND kind <> ALL ($3::text[]) ORDER BY id LIMIT $2`

// Claim takes up to max of the oldest messages not of the kinds exclude,
// every message of a key in id order, and holds their keys from other
// relays until finish is called. finish deletes the messages of published
// (ids of the claim's messages the broker acknowledged) and ends the claim;
// it must be called once, whatever happened (with nil to delete nothing).
func (o *Outbox) Claim(ctx context.Context, max int, exclude []messages.OutboxKind) ([]messages.OutboxMessage, func(ctx context.Context, published []int64) error, error) {
	conn, err := o.db.Conn(ctx)
	if err != nil {
		return nil, nil, o.error("claim outbox", err)
	}
	// The transaction outlives ctx, which bounds the claim's statements
	// only: database/sql would roll back a transaction whose BeginTx
	// context ended, under the relay that publishes before it deletes.
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		conn.Close()
		return nil, nil, o.error("claim outbox: begin", err)
	}
	end := func(ctx context.Context, published []int64) error {
		defer conn.Close()
		if len(published) == 0 {
			return o.error("end outbox claim", tx.Rollback())
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE id = ANY ($1::bigint[])`, pq.Array(published)); err != nil {
			_ = tx.Rollback()
			return o.error("delete published outbox messages", err)
		}
		return o.error("delete published outbox messages: commit", tx.Commit())
	}
	kinds := make([]string, len(exclude))
	for i, k := range exclude {
		kinds[i] = string(k)
	}
	var keys []string
	rows, err := tx.QueryContext(ctx, claimKeys, max, outboxLockClass, pq.Array(kinds))
	if err == nil {
		for rows.Next() {
			var k string
			if err = rows.Scan(&k); err != nil {
				break
			}
			keys = append(keys, k)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		_ = end(ctx, nil)
		return nil, nil, o.error("claim outbox keys", err)
	}
	if len(keys) == 0 {
		return nil, end, nil
	}
	msgs, err := o.read(ctx, tx, keys, max, kinds)
	if err != nil {
		_ = end(ctx, nil)
		return nil, nil, err
	}
	return msgs, end, nil
}

func (o *Outbox) read(ctx context.Context, tx *sql.Tx, keys []string, max int, kinds []string) ([]messages.OutboxMessage, error) {
	rows, err := tx.QueryContext(ctx, claimMessages, pq.Array(keys), max, pq.Array(kinds))
	if err != nil {
		return nil, o.error("claim outbox messages", err)
	}
	defer rows.Close()
	var msgs []messages.OutboxMessage
	for rows.Next() {
		var (
			m       messages.OutboxMessage
			kind    string
			key     sql.NullString
			payload string
		)
		if err := rows.Scan(&m.ID, &kind, &m.OrderingKey, &key, &m.EventID, &payload, &m.Created); err != nil {
			return nil, o.error("claim outbox messages", err)
		}
		m.Kind, m.Value = messages.OutboxKind(kind), []byte(payload)
		if key.Valid {
			m.Key = []byte(key.String)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, o.error("claim outbox messages", err)
	}
	return msgs, nil
}

// Backlog reports how many messages wait and the oldest one's age.
func (o *Outbox) Backlog(ctx context.Context) (messages.OutboxBacklog, error) {
	var (
		b      messages.OutboxBacklog
		oldest float64
	)
	err := o.db.QueryRowContext(ctx, `
		SELECT count(*), COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0)::float8 FROM outbox`).Scan(&b.Pending, &oldest)
	if err != nil {
		return b, o.error("outbox backlog", err)
	}
	b.Oldest = time.Duration(max(oldest, 0) * float64(time.Second))
	return b, nil
}

// Listen wakes the relay: wake receives a value when a transaction that
// wrote to the outbox commits (NOTIFY on OutboxChannel), and when the
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
