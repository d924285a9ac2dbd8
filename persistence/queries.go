package persistence

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// The reads a patch service serves, on schema version 2 (a system's
// packages and advisories as sorted id arrays in its row).
//
// The two listings of systems (by advisory, by package name) are paged by
// keyset on the system id, not by OFFSET: a page asks for the systems after
// the last id of the page before, so a deep page costs what the first does
// (OFFSET n reads and throws away n rows), and systems stored or deleted
// between two pages neither shift a system onto two pages nor hide one. The
// arrays' GIN indexes (system_advisory_ids, system_package_ids) find the
// systems, intersected with the org's (the account_id index); the cursor
// filters them and the page is sorted.

// PageSize is how many systems a page of AdvisorySystems and PackageSystems
// holds at most.
const PageSize = 100

// SystemAdvisory is one advisory affecting a system.
type SystemAdvisory struct {
	Name          string
	Type          string // security, bugfix, enhancement, unknown
	Severity      string // "" when not known
	Status        AdvisoryStatus
	FirstReported time.Time // when an evaluation first found it affecting the system (UTC)
}

// AffectedSystem is a system an advisory affects, and how.
type AffectedSystem struct {
	ID          int64 // the system's id: what a page's cursor is made of
	InventoryID string
	DisplayName string
	Status      AdvisoryStatus
}

// InstalledSystem is a system with a package of the name asked for.
type InstalledSystem struct {
	ID          int64 // the system's id: what a page's cursor is made of
	InventoryID string
	DisplayName string
	EVRAs       []string // the builds of that name installed, sorted
}

// systemAdvisoriesQuery lists a system's advisories. The LEFT JOINs keep
// one row of NULLs for a stored system that nothing affects, so that "no
// advisories" and "no such system" differ; each array is unnested once
// (an expression such as id = ANY (installable_advisory_ids) would
// decompress the TOASTed array again for every advisory).
const systemAdvisoriesQuery = `
	SELECT a.name, a.advisory_type, a.severity, x.installable, x.first_reported
	FROM system s
	JOIN account ac ON ac.id = s.account_id
	LEFT JOIN LATERAL (
		SELECT f.id, f.first_reported, i.id IS NOT NULL AS installable
		FROM unnest(s.advisory_ids, s.advisory_first_reported) AS f (id, first_reported)
		LEFT JOIN unnest(s.installable_advisory_ids) AS i (id) ON i.id = f.id
	) x ON true
	LEFT JOIN advisory a ON a.id = x.id
	WHERE ac.org_id = $1 AND s.inventory_id = $2
	ORDER BY a.name`

// SystemAdvisories lists the advisories affecting the system of orgID
// with inventoryID, sorted by name; ErrNoSystem when it is not stored.
func (s *Store) SystemAdvisories(ctx context.Context, orgID, inventoryID string) ([]SystemAdvisory, error) {
	var out []SystemAdvisory
	found := false
	err := s.withConn(ctx, "system advisories", func(conn *sql.Conn) error {
		out, found = nil, false
		rows, err := conn.QueryContext(ctx, systemAdvisoriesQuery, orgID, inventoryID)
		if err != nil {
			return fmt.Errorf("system advisories: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			found = true
			var (
				name, typ, severity sql.NullString
				installable         sql.NullBool
				first               sql.NullTime
			)
			if err := rows.Scan(&name, &typ, &severity, &installable, &first); err != nil {
				return fmt.Errorf("system advisories: %w", err)
			}
			if !name.Valid {
				continue // the system, affected by nothing
			}
			a := SystemAdvisory{Name: name.String, Type: typ.String, Severity: severity.String, Status: Applicable, FirstReported: first.Time.UTC()}
			if installable.Bool {
				a.Status = Installable
			}
			out = append(out, a)
		}
		return rows.Err()
	})
	if err == nil && !found {
		return nil, ErrNoSystem
	}
	return out, err
}

// systemPackagesQuery lists a system's packages; a stored system without
// any gives one row of NULLs.
const systemPackagesQuery = `
	SELECT pn.name, p.evra
	FROM system s
	JOIN account ac ON ac.id = s.account_id
	LEFT JOIN LATERAL unnest(s.package_ids) AS sp (id) ON true
	LEFT JOIN package p ON p.id = sp.id
	LEFT JOIN package_name pn ON pn.id = p.name_id
	WHERE ac.org_id = $1 AND s.inventory_id = $2
	ORDER BY pn.name, p.evra`

// SystemPackages lists the packages installed on the system of orgID with
// inventoryID, sorted by name, then EVRA; ErrNoSystem when it is not stored.
func (s *Store) SystemPackages(ctx context.Context, orgID, inventoryID string) ([]Package, error) {
	var out []Package
	found := false
	err := s.withConn(ctx, "system packages", func(conn *sql.Conn) error {
		out, found = nil, false
		rows, err := conn.QueryContext(ctx, systemPackagesQuery, orgID, inventoryID)
		if err != nil {
			return fmt.Errorf("system packages: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			found = true
			var name, evra sql.NullString
			if err := rows.Scan(&name, &evra); err != nil {
				return fmt.Errorf("system packages: %w", err)
			}
			if name.Valid {
				out = append(out, Package{Name: name.String, EVRA: evra.String})
			}
		}
		return rows.Err()
	})
	if err == nil && !found {
		return nil, ErrNoSystem
	}
	return out, err
}

// The two listings first resolve the names to ids (one short query), then
// list with those ids as parameters, so that the statement is planned
// knowing them: the org's account id (its share of the systems, from the
// column's statistics) and the advisory's id (how many systems hold it,
// from the array's most common elements). The planner then intersects the
// GIN index's bitmap with the account index's (BitmapAnd) and reads only
// the org's matching systems. Resolved inside the same statement, the ids
// are unknown when it is planned, the planner guesses 0.5 % of the
// systems for any of them, and at 50,000 systems it read every system with
// a build of the name, in every org, checking each one's org (84 ms where
// this takes 4).

// advisorySystemsQuery is a page of the systems of account $1 that advisory
// $2 affects: those with id over $3, the first $4 by id. The status is
// worked out in the outer query, for the page's rows only (it reads the
// installable array).
const advisorySystemsQuery = `
	SELECT p.id, p.inventory_id, p.display_name, $2::int = ANY (p.installable_advisory_ids)
	FROM (
		SELECT s.id, s.inventory_id, s.display_name, s.installable_advisory_ids
		FROM system s
		WHERE s.account_id = $1 AND s.advisory_ids @> ARRAY[$2::int] AND s.id > $3
		ORDER BY s.id
		LIMIT $4
	) p
	ORDER BY p.id`

// AdvisorySystems returns a page of the systems of orgID that the advisory
// named affects, by system id: those after the system id after (0 for the
// first page), at most PageSize. next is the after of the next page, 0
// when this page is the last. An advisory never stored affects nothing.
func (s *Store) AdvisorySystems(ctx context.Context, orgID, advisory string, after int64) (page []AffectedSystem, next int64, err error) {
	err = s.withConn(ctx, "advisory systems", func(conn *sql.Conn) error {
		page = nil
		var account, id sql.NullInt64
		if err := conn.QueryRowContext(ctx, `SELECT (SELECT id FROM account WHERE org_id = $1), (SELECT id FROM advisory WHERE name = $2)`,
			orgID, advisory).Scan(&account, &id); err != nil {
			return fmt.Errorf("advisory systems: %w", err)
		}
		if !account.Valid || !id.Valid {
			return nil
		}
		rows, err := conn.QueryContext(ctx, advisorySystemsQuery, account.Int64, id.Int64, after, PageSize+1)
		if err != nil {
			return fmt.Errorf("advisory systems: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var a AffectedSystem
			var installable bool
			if err := rows.Scan(&a.ID, &a.InventoryID, &a.DisplayName, &installable); err != nil {
				return fmt.Errorf("advisory systems: %w", err)
			}
			a.Status = Applicable
			if installable {
				a.Status = Installable
			}
			page = append(page, a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, err
	}
	if len(page) > PageSize {
		page = page[:PageSize]
		next = page[PageSize-1].ID
	}
	return page, next, nil
}

// packageBuildsQuery resolves an org and a package name: the account id,
// and the name's builds, ids and EVRAs in EVRA order.
const packageBuildsQuery = `
	SELECT (SELECT id FROM account WHERE org_id = $1),
		ARRAY(SELECT p.id FROM package_name pn JOIN package p ON p.name_id = pn.id WHERE pn.name = $2 ORDER BY p.evra),
		ARRAY(SELECT p.evra FROM package_name pn JOIN package p ON p.name_id = pn.id WHERE pn.name = $2 ORDER BY p.evra)`

// packageSystemsQuery is a page of the systems of account $1 with any of
// the builds $2: one GIN index scan per build (a handful), each giving the
// systems holding that build, so which builds a system has (their
// positions in $2) comes from the join, without reading its array.
const packageSystemsQuery = `
	SELECT s.id, s.inventory_id, s.display_name, array_agg(b.i ORDER BY b.i)
	FROM unnest($2::bigint[]) WITH ORDINALITY AS b (id, i)
	JOIN system s ON s.package_ids @> ARRAY[b.id]
	WHERE s.account_id = $1 AND s.id > $3
	GROUP BY s.id
	ORDER BY s.id
	LIMIT $4`

// PackageSystems returns a page of the systems of orgID with any build of
// the package name installed, by system id: those after the system id
// after (0 for the first page), at most PageSize, each with the builds it
// has. next is the after of the next page, 0 when this page is the last.
func (s *Store) PackageSystems(ctx context.Context, orgID, name string, after int64) (page []InstalledSystem, next int64, err error) {
	err = s.withConn(ctx, "package systems", func(conn *sql.Conn) error {
		page = nil
		var account sql.NullInt64
		var builds pq.Int64Array
		var evras pq.StringArray
		if err := conn.QueryRowContext(ctx, packageBuildsQuery, orgID, name).Scan(&account, &builds, &evras); err != nil {
			return fmt.Errorf("package systems: %w", err)
		}
		if !account.Valid || len(builds) == 0 {
			return nil
		}
		rows, err := conn.QueryContext(ctx, packageSystemsQuery, account.Int64, builds, after, PageSize+1)
		if err != nil {
			return fmt.Errorf("package systems: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var i InstalledSystem
			var at pq.Int64Array
			if err := rows.Scan(&i.ID, &i.InventoryID, &i.DisplayName, &at); err != nil {
				return fmt.Errorf("package systems: %w", err)
			}
			for _, k := range at {
				if k < 1 || int(k) > len(evras) {
					return fmt.Errorf("package systems: build %d of %d", k, len(evras))
				}
				i.EVRAs = append(i.EVRAs, evras[k-1])
			}
			page = append(page, i)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, err
	}
	if len(page) > PageSize {
		page = page[:PageSize]
		next = page[PageSize-1].ID
	}
	return page, next, nil
}
