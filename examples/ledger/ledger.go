package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/consumer"
)

// Ledger writes payments to PostgreSQL a batch at a time and produces each
// account's balance as a result. It is a consumer.BatchHandler: the
// consumer hands it the records ready at once (never two of one account:
// key order), and it answers one outcome per record.
type Ledger struct {
	DB      *sql.DB
	Results string // the topic of the balances
}

// CreateTable makes the ledger's table: one row per payment, keyed by the
// record's position, so a record written again (a retry, a redelivery
// after a crash) adds nothing.
func CreateTable(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS ledger_payment (
		topic text NOT NULL, part int NOT NULL, "offset" bigint NOT NULL,
		account text NOT NULL, cents bigint NOT NULL,
		PRIMARY KEY (topic, part, "offset"))`)
	return err
}

// Handle is a batch of one.
func (l *Ledger) Handle(ctx context.Context, r *consumer.Record) error {
	return l.HandleBatch(ctx, []*consumer.Record{r})[0]
}

// HandleBatch parses every record (a bad amount fails that record alone,
// for good), writes the good ones in one INSERT in one transaction, and
// queues each account's new balance as the record's result.
func (l *Ledger) HandleBatch(ctx context.Context, records []*consumer.Record) []error {
	errs := make([]error, len(records))
	var topics, accounts []string
	var parts []int32
	var offsets, cents []int64
	var good []int
	for i, r := range records {
		amount, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil || len(r.Key) == 0 {
			errs[i] = consumer.Permanent(fmt.Errorf("not a payment: key %q, value %q", r.Key, r.Value))
			continue
		}
		if r.Topic == "refunds" {
			amount = -amount
		}
		topics, parts, offsets = append(topics, r.Topic), append(parts, r.Partition), append(offsets, r.Offset)
		accounts, cents = append(accounts, string(r.Key)), append(cents, amount)
		good = append(good, i)
	}
	if len(good) == 0 {
		return errs
	}
	balances, err := l.write(ctx, topics, parts, offsets, accounts, cents)
	for _, i := range good {
		if err != nil {
			errs[i] = consumer.FailedIn("ledger-db", err) // retried; an outage holds every record, none dead-lettered
			continue
		}
		r := records[i]
		r.Produce(consumer.Message{Topic: l.Results, Key: r.Key, Value: []byte(strconv.FormatInt(balances[string(r.Key)], 10))})
	}
	return errs
}

// write inserts the payments and returns the balances of their accounts.
func (l *Ledger) write(ctx context.Context, topics []string, parts []int32, offsets []int64, accounts []string, cents []int64) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err := l.DB.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_payment (topic, part, "offset", account, cents)
		SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[], $5::bigint[])
		ON CONFLICT DO NOTHING`, pq.Array(topics), pq.Array(parts), pq.Array(offsets), pq.Array(accounts), pq.Array(cents)); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT account, sum(cents)::bigint FROM ledger_payment WHERE account = ANY($1) GROUP BY account`, pq.Array(accounts))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	balances := map[string]int64{}
	for rows.Next() {
		var a string
		var b int64
		if err := rows.Scan(&a, &b); err != nil {
			return nil, err
		}
		balances[a] = b
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, errors.Join(errors.New("commit"), err)
	}
	return balances, nil
}
