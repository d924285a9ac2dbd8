package bench

import (
	"context"
	"database/sql"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/persistence"
)

// oldSchema is the four reads on schema version 1 (migration 0001: one
// system_package row per system and package, one system_advisory row per
// system and advisory, each with a primary key leading on system_id and no
// other index), the "before" of the reads scenario. It answers exactly as
// package persistence does on version 2 (the same rows, order and pages),
// so the two are timed on the same questions and their answers compared.
type oldSchema struct{ db *sql.DB }

// The old schema's SQL, kept here only for the benchmark.
const (
	v1SystemAdvisories = `
		SELECT a.name, a.advisory_type, a.severity, sa.status, sa.first_reported
		FROM system s
		JOIN account ac ON ac.id = s.account_id
		LEFT JOIN system_advisory sa ON sa.system_id = s.id
		LEFT JOIN advisory a ON a.id = sa.advisory_id
		WHERE ac.org_id = $1 AND s.inventory_id = $2
		ORDER BY a.name`
	v1AdvisorySystems = `
		SELECT s.id, s.inventory_id, s.display_name, sa.status
		FROM advisory a
		JOIN system_advisory sa ON sa.advisory_id = a.id
		JOIN system s ON s.id = sa.system_id
		WHERE a.name = $2 AND s.account_id = (SELECT id FROM account WHERE org_id = $1) AND sa.system_id > $3
		ORDER BY sa.system_id
		LIMIT $4`
	v1SystemPackages = `
		SELECT pn.name, p.evra
		FROM system s
		JOIN account ac ON ac.id = s.account_id
		LEFT JOIN system_package sp ON sp.system_id = s.id
		LEFT JOIN package p ON p.id = sp.package_id
		LEFT JOIN package_name pn ON pn.id = p.name_id
		WHERE ac.org_id = $1 AND s.inventory_id = $2
		ORDER BY pn.name, p.evra`
	v1PackageSystems = `
		SELECT s.id, s.inventory_id, s.display_name, array_agg(p.evra ORDER BY p.evra)
		FROM package_name pn
		JOIN package p ON p.name_id = pn.id
		JOIN system_package sp ON sp.package_id = p.id
		JOIN system s ON s.id = sp.system_id
		WHERE pn.name = $2 AND s.account_id = (SELECT id FROM account WHERE org_id = $1) AND sp.system_id > $3
		GROUP BY s.id
		ORDER BY s.id
		LIMIT $4`
)

func (o oldSchema) systemAdvisories(ctx context.Context, org, inv string) ([]persistence.SystemAdvisory, error) {
	rows, err := o.db.QueryContext(ctx, v1SystemAdvisories, org, inv)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []persistence.SystemAdvisory
	found := false
	for rows.Next() {
		found = true
		var name, typ, severity, status sql.NullString
		var first sql.NullTime
		if err := rows.Scan(&name, &typ, &severity, &status, &first); err != nil {
			return nil, err
		}
		if name.Valid {
			out = append(out, persistence.SystemAdvisory{Name: name.String, Type: typ.String, Severity: severity.String,
				Status: persistence.AdvisoryStatus(status.String), FirstReported: first.Time.UTC()})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, persistence.ErrNoSystem
	}
	return out, nil
}

func (o oldSchema) advisorySystems(ctx context.Context, org, adv string, after int64) ([]persistence.AffectedSystem, int64, error) {
	rows, err := o.db.QueryContext(ctx, v1AdvisorySystems, org, adv, after, persistence.PageSize+1)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var page []persistence.AffectedSystem
	for rows.Next() {
		var a persistence.AffectedSystem
		var status string
		if err := rows.Scan(&a.ID, &a.InventoryID, &a.DisplayName, &status); err != nil {
			return nil, 0, err
		}
		a.Status = persistence.AdvisoryStatus(status)
		page = append(page, a)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	return trimPage(page, func(a persistence.AffectedSystem) int64 { return a.ID })
}

func (o oldSchema) systemPackages(ctx context.Context, org, inv string) ([]persistence.Package, error) {
	rows, err := o.db.QueryContext(ctx, v1SystemPackages, org, inv)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []persistence.Package
	found := false
	for rows.Next() {
		found = true
		var name, evra sql.NullString
		if err := rows.Scan(&name, &evra); err != nil {
			return nil, err
		}
		if name.Valid {
			out = append(out, persistence.Package{Name: name.String, EVRA: evra.String})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, persistence.ErrNoSystem
	}
	return out, nil
}

func (o oldSchema) packageSystems(ctx context.Context, org, name string, after int64) ([]persistence.InstalledSystem, int64, error) {
	rows, err := o.db.QueryContext(ctx, v1PackageSystems, org, name, after, persistence.PageSize+1)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var page []persistence.InstalledSystem
	for rows.Next() {
		var i persistence.InstalledSystem
		var evras pq.StringArray
		if err := rows.Scan(&i.ID, &i.InventoryID, &i.DisplayName, &evras); err != nil {
			return nil, 0, err
		}
		i.EVRAs = evras
		page = append(page, i)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	return trimPage(page, func(i persistence.InstalledSystem) int64 { return i.ID })
}

// trimPage keeps the first PageSize of page (asked for one more, to know
// whether another page follows) and returns the next page's cursor.
func trimPage[T any](page []T, id func(T) int64) ([]T, int64, error) {
	if len(page) > persistence.PageSize {
		page = page[:persistence.PageSize]
		return page, id(page[len(page)-1]), nil
	}
	if len(page) == 0 {
		return nil, 0, nil
	}
	return page, 0, nil
}
