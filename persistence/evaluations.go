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
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO advisory (name, advisory_type)
			SELECT n, t FROM unnest($1::text[], $2::text[]) AS a (n, t) ORDER BY n
			ON CONFLICT (name) DO NOTHING`, pq.Array(names), pq.Array(types)); err != nil {
			return fmt.Errorf("insert advisories: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `
			DELETE FROM system_advisory sa USING advisory a
			WHERE sa.system_id = $1 AND sa.advisory_id = a.id AND NOT (a.name = ANY($2::text[]))`,
			systemID, pq.Array(names)); err != nil {
			return fmt.Errorf("remove fixed advisories: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO system_advisory (system_id, advisory_id, status)
			SELECT $1, a.id, w.status FROM unnest($2::text[], $3::text[]) AS w (name, status)
			JOIN advisory a ON a.name = w.name
			ORDER BY a.id
			ON CONFLICT (system_id, advisory_id) DO UPDATE SET status = EXCLUDED.status
			WHERE system_advisory.status <> EXCLUDED.status`,
			systemID, pq.Array(names), pq.Array(statuses)); err != nil {
			return fmt.Errorf("store system advisories: %w", err)
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
