package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lib/pq"
)

// SystemState is what the database holds about one host, in a canonical
// form (sorted lists, no wall-clock columns) so two states compare equal when
// the same events were applied.
type SystemState struct {
	SystemID               int64
	OrgID                  string
	InventoryID            string
	DisplayName            string
	Arch                   string
	Releasever             string
	Repos                  []string
	Modules                []Module
	Packages               []Package // sorted by name, then EVRA
	ProfileChecksum        string
	LastEventTime          time.Time
	LastEvaluatedEventTime *time.Time
	Advisories             map[string]AdvisoryStatus
	Installable            int
	Applicable             int
	PackagesUpdatable      int
}

// ErrNoSystem is returned by LoadSystem for a host that is not stored.
var ErrNoSystem = errors.New("system not stored")

// LoadSystem reads a host's stored state (for evaluations of a stored
// profile, checkers and tests).
func (s *Store) LoadSystem(ctx context.Context, orgID, inventoryID string) (*SystemState, error) {
	st := &SystemState{OrgID: orgID, InventoryID: inventoryID, Advisories: map[string]AdvisoryStatus{}}
	var repos, modules pq.StringArray
	var evaluated sql.NullTime
	// One connection for the three queries, taken first: a deadline that
	// passes while waiting for it is congestion, not this host's failure.
	if err := s.admit.acquire(ctx); err != nil {
		return nil, classify(poolWait(fmt.Errorf("load system: waiting for a database connection: %w", err)))
	}
	defer s.admit.release()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, classify(poolWait(fmt.Errorf("load system: %w", err)))
	}
	defer conn.Close()
	err = conn.QueryRowContext(ctx, `
		SELECT s.id, s.display_name, s.arch, s.releasever, s.repos, s.modules, s.profile_checksum, s.last_event_time,
			s.last_evaluated_event_time, s.installable_advisories, s.applicable_advisories, s.packages_updatable
		FROM system s JOIN account a ON a.id = s.account_id
		WHERE a.org_id = $1 AND s.inventory_id = $2`, orgID, inventoryID).Scan(
		&st.SystemID, &st.DisplayName, &st.Arch, &st.Releasever, &repos, &modules, &st.ProfileChecksum, &st.LastEventTime,
		&evaluated, &st.Installable, &st.Applicable, &st.PackagesUpdatable)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoSystem
	}
	if err != nil {
		return nil, classify(fmt.Errorf("load system: %w", err))
	}
	st.Repos = repos
	for _, m := range modules {
		name, stream, _ := strings.Cut(m, ":")
		st.Modules = append(st.Modules, Module{Name: name, Stream: stream})
	}
	if evaluated.Valid {
		t := evaluated.Time
		st.LastEvaluatedEventTime = &t
	}
	rows, err := conn.QueryContext(ctx, `
		SELECT pn.name, p.evra FROM system s, unnest(s.package_ids) AS sp (id)
		JOIN package p ON p.id = sp.id JOIN package_name pn ON pn.id = p.name_id
		WHERE s.id = $1 ORDER BY pn.name, p.evra`, st.SystemID)
	if err != nil {
		return nil, classify(fmt.Errorf("load packages: %w", err))
	}
	for rows.Next() {
		var p Package
		if err := rows.Scan(&p.Name, &p.EVRA); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		st.Packages = append(st.Packages, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	rows, err = conn.QueryContext(ctx, `
		SELECT a.name, CASE WHEN a.id = ANY (s.installable_advisory_ids) THEN 'installable' ELSE 'applicable' END
		FROM system s, unnest(s.advisory_ids) AS sa (id) JOIN advisory a ON a.id = sa.id
		WHERE s.id = $1`, st.SystemID)
	if err != nil {
		return nil, classify(fmt.Errorf("load advisories: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var name, status string
		if err := rows.Scan(&name, &status); err != nil {
			return nil, classify(err)
		}
		st.Advisories[name] = AdvisoryStatus(status)
	}
	return st, classify(rows.Err())
}

// IsDeleted reports whether the host is remembered as deleted.
func (s *Store) IsDeleted(ctx context.Context, inventoryID string) (bool, error) {
	if err := s.admit.acquire(ctx); err != nil {
		return false, classify(poolWait(fmt.Errorf("is deleted: waiting for a database connection: %w", err)))
	}
	defer s.admit.release()
	var deleted bool
	err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM deleted_system WHERE inventory_id = $1)`, inventoryID).Scan(&deleted)
	return deleted, classify(err)
}
