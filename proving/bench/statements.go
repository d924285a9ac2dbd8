package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// StatementCost is what one statement of the listener cost PostgreSQL over
// an end-to-end window, per event of the window (pg_stat_statements, which
// .ci/postgres preloads).
type StatementCost struct {
	// Query is the statement as pg_stat_statements normalised it, its
	// whitespace collapsed and cut to statementText characters.
	Query string `json:"query"`
	// Calls, ExecMS, PlanMS, Rows, BlocksDirtied and WALBytes are per event.
	Calls         float64 `json:"calls"`
	ExecMS        float64 `json:"exec_ms"`
	PlanMS        float64 `json:"plan_ms"`
	Rows          float64 `json:"rows"`
	BlocksDirtied float64 `json:"shared_blocks_dirtied"`
	WALBytes      float64 `json:"wal_bytes"`
}

// statementText is how much of a statement's text a report keeps.
const statementText = 160

// statementWindow measures PostgreSQL's work in one database between start
// and read: per statement (pg_stat_statements, reset at the start) and the
// WAL the whole server wrote (LSN difference: only the listener under
// measurement writes while it runs).
type statementWindow struct {
	url string
	lsn string // the WAL position at the start; "" when the server has no pg_stat_statements
}

// startStatements resets pg_stat_statements and notes the WAL position. A
// server without the module preloaded measures nothing (read returns none)
// rather than failing the run.
func startStatements(ctx context.Context, url string) (statementWindow, error) {
	w := statementWindow{url: url}
	db, err := sql.Open("postgres", url)
	if err != nil {
		return w, err
	}
	defer db.Close()
	var loaded bool
	if err := db.QueryRowContext(ctx, `SELECT 'pg_stat_statements' = ANY (string_to_array(current_setting('shared_preload_libraries'), ', '))`).Scan(&loaded); err != nil {
		return w, fmt.Errorf("read shared_preload_libraries: %w", err)
	}
	if !loaded {
		return w, nil
	}
	if _, err := db.ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return w, fmt.Errorf("create extension pg_stat_statements: %w", err)
	}
	if _, err := db.ExecContext(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return w, fmt.Errorf("reset pg_stat_statements: %w", err)
	}
	err = db.QueryRowContext(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&w.lsn)
	return w, err
}

// read returns the statements run in the window's database since start,
// costliest first, and the WAL bytes written, each per event of n; none
// when the server could not measure them.
func (w statementWindow) read(ctx context.Context, n float64) (costs []StatementCost, walBytes float64, err error) {
	if w.lsn == "" {
		return nil, 0, nil
	}
	db, err := sql.Open("postgres", w.url)
	if err != nil {
		return nil, 0, err
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, w.lsn).Scan(&walBytes); err != nil {
		return nil, 0, fmt.Errorf("read the WAL position: %w", err)
	}
	rows, err := db.QueryContext(ctx, `
		SELECT query, calls, total_exec_time, total_plan_time, rows, shared_blks_dirtied, wal_bytes
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_current_wal_lsn%'
		ORDER BY total_exec_time + total_plan_time DESC`)
	if err != nil {
		return nil, 0, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			c            StatementCost
			calls, dirty int64
			rowCount     int64
			wal          float64
		)
		if err := rows.Scan(&c.Query, &calls, &c.ExecMS, &c.PlanMS, &rowCount, &dirty, &wal); err != nil {
			return nil, 0, err
		}
		c.Query = shortQuery(c.Query)
		c.Calls, c.ExecMS, c.PlanMS = float64(calls)/n, c.ExecMS/n, c.PlanMS/n
		c.Rows, c.BlocksDirtied, c.WALBytes = float64(rowCount)/n, float64(dirty)/n, wal/n
		costs = append(costs, c)
	}
	return costs, walBytes / n, rows.Err()
}

// shortQuery collapses a statement's whitespace and cuts it to statementText.
func shortQuery(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if r := []rune(q); len(r) > statementText {
		q = string(r[:statementText]) + "…"
	}
	return q
}
