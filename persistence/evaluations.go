package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lib/pq"
)

// StoreEvaluation stores the advisories of the system's profile uploaded at
// eventTime, in one transaction: new advisories added, fixed ones removed,
// statuses updated, counts and last evaluation set. When a newer upload was
// stored meanwhile, or the host was deleted, it stores nothing: that upload
// is evaluated on its own. It reports whether it stored.
func (s *Store) StoreEvaluation(ctx context.Context, systemID int64, eventTime time.Time, e Evaluation) (bool, error) {
	advs := slices.Clone(e.Advisories)
	slices.SortFunc(advs, func(a, b AdvisoryResult) int { return strings.Compare(a.Name, b.Name) })
	advs = slices.CompactFunc(advs, func(a, b AdvisoryResult) bool { return a.Name == b.Name })
	names := make([]string, len(advs))
	types := make([]string, len(advs))
	statuses := make([]string, len(advs))
	var installable, applicable, security, bugfix, enhancement int
	for i, a := range advs {
		names[i], types[i], statuses[i] = a.Name, a.Type, string(a.Status)
		if a.Status == Installable {
			installable++
		} else {
			applicable++
		}
		switch a.Type {
		case "security":
			security++
		case "bugfix":
			bugfix++
		case "enhancement":
			enhancement++
		}
	}

	stored := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		stored = false
		var lastEvent time.Time
		err := tx.QueryRowContext(ctx, `SELECT last_event_time FROM system WHERE id = $1 FOR UPDATE`, systemID).Scan(&lastEvent)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("lock system: %w", err)
		}
		if !lastEvent.Equal(eventTime) {
			return nil // a newer upload will be evaluated
		}
		if err := replaceAdvisories(ctx, tx, systemID, names, types, statuses); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `
			UPDATE system SET last_evaluation = now(), last_evaluated_event_time = $2,
				installable_advisories = $3, applicable_advisories = $4, security_advisories = $5,
				bugfix_advisories = $6, enhancement_advisories = $7, packages_updatable = $8
			WHERE id = $1`,
			systemID, eventTime, installable, applicable, security, bugfix, enhancement, e.PackagesUpdatable); err != nil {
			return fmt.Errorf("update system counts: %w", err)
		}
		stored = true
		return nil
	})
	return stored, err
}

// replaceAdvisories makes the system's advisory rows equal the given
// (sorted) names and statuses, writing only the difference from what is
// stored: a re-evaluation usually changes few of them.
func replaceAdvisories(ctx context.Context, tx *sql.Tx, systemID int64, names, types, statuses []string) error {
	type row struct {
		id     int
		status string
	}
	current := map[string]row{}
	rows, err := tx.QueryContext(ctx, `
		SELECT a.name, a.id, sa.status FROM system_advisory sa JOIN advisory a ON a.id = sa.advisory_id
		WHERE sa.system_id = $1`, systemID)
	if err != nil {
		return fmt.Errorf("read system advisories: %w", err)
	}
	for rows.Next() {
		var name string
		var r row
		if err := rows.Scan(&name, &r.id, &r.status); err != nil {
			rows.Close()
			return fmt.Errorf("read system advisories: %w", err)
		}
		current[name] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read system advisories: %w", err)
	}

	var addNames, addTypes, addStatuses, changedStatuses []string
	var changedIDs []int64
	for i, name := range names {
		cur, ok := current[name]
		if !ok {
			addNames, addTypes, addStatuses = append(addNames, name), append(addTypes, types[i]), append(addStatuses, statuses[i])
			continue
		}
		delete(current, name)
		if cur.status != statuses[i] {
			changedIDs, changedStatuses = append(changedIDs, int64(cur.id)), append(changedStatuses, statuses[i])
		}
	}
	if len(current) > 0 {
		fixed := make([]int64, 0, len(current))
		for _, r := range current {
			fixed = append(fixed, int64(r.id))
		}
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM system_advisory WHERE system_id = $1 AND advisory_id = ANY($2::int[])`, systemID, pq.Array(fixed)); err != nil {
			return fmt.Errorf("remove fixed advisories: %w", err)
		}
	}
	if len(changedIDs) > 0 {
		if _, err := tx.ExecContext(ctx, `
			UPDATE system_advisory sa SET status = w.status
			FROM unnest($2::int[], $3::text[]) AS w (id, status)
			WHERE sa.system_id = $1 AND sa.advisory_id = w.id`, systemID, pq.Array(changedIDs), pq.Array(changedStatuses)); err != nil {
			return fmt.Errorf("update advisory statuses: %w", err)
		}
	}
	if len(addNames) == 0 {
		return nil
	}
	// As for packages: insert shared rows and look them up in separate
	// statements, so a row committed concurrently by another transaction is seen.
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO advisory (name, advisory_type)
		SELECT n, t FROM unnest($1::text[], $2::text[]) AS a (n, t) ORDER BY n
		ON CONFLICT (name) DO NOTHING`, pq.Array(addNames), pq.Array(addTypes)); err != nil {
		return fmt.Errorf("insert advisories: %w", err)
	}
	res, err := tx.ExecContext(ctx, `
		INSERT INTO system_advisory (system_id, advisory_id, status)
		SELECT $1, a.id, w.status FROM unnest($2::text[], $3::text[]) AS w (name, status)
		JOIN advisory a ON a.name = w.name
		ORDER BY a.id
		ON CONFLICT (system_id, advisory_id) DO UPDATE SET status = EXCLUDED.status`,
		systemID, pq.Array(addNames), pq.Array(addStatuses))
	if err != nil {
		return fmt.Errorf("store system advisories: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n != int64(len(addNames)) {
		return fmt.Errorf("stored %d of %d new advisories", n, len(addNames))
	}
	return nil
}
