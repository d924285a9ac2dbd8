package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// StoreSystem applies an upload in one transaction: the account, the system
// row and, when the profile changed, its packages. It is idempotent: an
// upload not newer than the last applied event of the host, or for a host
// deleted recently, changes nothing.
func (s *Store) StoreSystem(ctx context.Context, u SystemUpload) (UploadResult, error) {
	u.canonicalize()
	sum := u.checksum()
	var res UploadResult
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res = UploadResult{}
		var deleted bool
		if err := tx.QueryRowContext(ctx,
			`SELECT EXISTS (SELECT 1 FROM deleted_system WHERE inventory_id = $1)`, u.InventoryID).Scan(&deleted); err != nil {
			return fmt.Errorf("check deleted hosts: %w", err)
		}
		if deleted {
			res.Skipped = SkippedDeleted
			return nil
		}
		accountID, err := ensureAccount(ctx, tx, u.OrgID)
		if err != nil {
			return err
		}

		var (
			id                 int64
			lastEvent          time.Time
			checksum           string
			lastEvaluatedEvent sql.NullTime
		)
		err = tx.QueryRowContext(ctx, `
			SELECT id, last_event_time, profile_checksum, last_evaluated_event_time
			FROM system WHERE account_id = $1 AND inventory_id = $2 FOR UPDATE`,
			accountID, u.InventoryID).Scan(&id, &lastEvent, &checksum, &lastEvaluatedEvent)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			id, err = insertSystem(ctx, tx, accountID, &u, sum)
			if err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("load system: %w", err)
		case !u.EventTime.After(lastEvent):
			res.SystemID, res.Skipped, res.EventTime = id, SkippedOlder, lastEvent
			if u.EventTime.Equal(lastEvent) {
				res.Skipped = SkippedSameEvent
			}
			res.NeedsEvaluation = !lastEvaluatedEvent.Valid || lastEvaluatedEvent.Time.Before(lastEvent)
			return nil
		default:
			if err := updateSystem(ctx, tx, id, &u, sum); err != nil {
				return err
			}
			if checksum == sum {
				res.SystemID, res.Applied, res.NeedsEvaluation, res.EventTime = id, true, true, u.EventTime
				return nil
			}
		}
		if err := replacePackages(ctx, tx, id, u.Packages); err != nil {
			return err
		}
		res.SystemID, res.Applied, res.NeedsEvaluation, res.EventTime = id, true, true, u.EventTime
		return nil
	})
	return res, err
}

// ensureAccount returns the id of the account, creating it. DO NOTHING
// rather than DO UPDATE: an update would lock the account row until commit
// and serialise every system of the account.
func ensureAccount(ctx context.Context, tx *sql.Tx, orgID string) (int, error) {
	var id int
	err := tx.QueryRowContext(ctx,
		`INSERT INTO account (org_id) VALUES ($1) ON CONFLICT (org_id) DO NOTHING RETURNING id`, orgID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.QueryRowContext(ctx, `SELECT id FROM account WHERE org_id = $1`, orgID).Scan(&id)
	}
	if err != nil {
		return 0, fmt.Errorf("account %s: %w", orgID, err)
	}
	return id, nil
}

func insertSystem(ctx context.Context, tx *sql.Tx, accountID int, u *SystemUpload, sum string) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `
		INSERT INTO system (account_id, inventory_id, display_name, reporter, arch, host_type, os_name, os_major, os_minor,
			releasever, rhsm_version, repos, modules, profile_checksum, stale_timestamp, culled_timestamp,
			last_upload, last_event_time, last_request_id, packages_installed)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
		RETURNING id`,
		accountID, u.InventoryID, u.DisplayName, u.Reporter, u.Arch, u.HostType, u.OSName, u.OSMajor, u.OSMinor,
		u.Releasever, u.RHSMVersion, pq.Array(u.Repos), pq.Array(u.moduleStrings()), sum, u.StaleTimestamp, u.CulledTimestamp,
		u.LastUpload, u.EventTime, u.RequestID, len(u.Packages)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert system: %w", err)
	}
	return id, nil
}

func updateSystem(ctx context.Context, tx *sql.Tx, id int64, u *SystemUpload, sum string) error {
	_, err := tx.ExecContext(ctx, `
		UPDATE system SET display_name = $2, reporter = $3, arch = $4, host_type = $5, os_name = $6, os_major = $7,
			os_minor = $8, releasever = $9, rhsm_version = $10, repos = $11, modules = $12, profile_checksum = $13,
			stale_timestamp = $14, culled_timestamp = $15, last_upload = $16, last_event_time = $17,
			last_request_id = $18, packages_installed = $19
		WHERE id = $1`,
		id, u.DisplayName, u.Reporter, u.Arch, u.HostType, u.OSName, u.OSMajor, u.OSMinor, u.Releasever, u.RHSMVersion,
		pq.Array(u.Repos), pq.Array(u.moduleStrings()), sum, u.StaleTimestamp, u.CulledTimestamp, u.LastUpload,
		u.EventTime, u.RequestID, len(u.Packages))
	if err != nil {
		return fmt.Errorf("update system: %w", err)
	}
	return nil
}

// replacePackages makes the system's package rows equal pkgs. It reads
// what the system has and writes only the difference: an update usually
// changes a few of its hundreds of packages. New shared rows are inserted in
// sorted order (pkgs is sorted by canonicalize), which fixes the lock order.
func replacePackages(ctx context.Context, tx *sql.Tx, systemID int64, pkgs []Package) error {
	current := map[Package]int64{}
	rows, err := tx.QueryContext(ctx, `
		SELECT pn.name, p.evra, p.id FROM system_package sp
		JOIN package p ON p.id = sp.package_id JOIN package_name pn ON pn.id = p.name_id
		WHERE sp.system_id = $1`, systemID)
	if err != nil {
		return fmt.Errorf("read system packages: %w", err)
	}
	for rows.Next() {
		var p Package
		var id int64
		if err := rows.Scan(&p.Name, &p.EVRA, &id); err != nil {
			rows.Close()
			return fmt.Errorf("read system packages: %w", err)
		}
		current[p] = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read system packages: %w", err)
	}

	var names, evras []string
	for _, p := range pkgs {
		if _, ok := current[p]; ok {
			delete(current, p) // kept
			continue
		}
		names = append(names, p.Name)
		evras = append(evras, p.EVRA)
	}
	if len(current) > 0 {
		gone := make([]int64, 0, len(current))
		for _, id := range current {
			gone = append(gone, id)
		}
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM system_package WHERE system_id = $1 AND package_id = ANY($2::bigint[])`, systemID, pq.Array(gone)); err != nil {
			return fmt.Errorf("remove old packages: %w", err)
		}
	}
	if len(names) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO package_name (name) SELECT DISTINCT n FROM unnest($1::text[]) AS n ORDER BY n
		ON CONFLICT (name) DO NOTHING`, pq.Array(names)); err != nil {
		return fmt.Errorf("insert package names: %w", err)
	}
	// Separate statements for inserting and looking up: under READ COMMITTED
	// a statement sees only rows committed before it began. A package another
	// transaction inserted concurrently makes ON CONFLICT DO NOTHING skip it
	// (after waiting for that transaction) without returning its id, and a
	// lookup in the same statement would not see it: the host would lose it.
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO package (name_id, evra)
		SELECT pn.id, w.evra FROM unnest($1::text[], $2::text[]) AS w (name, evra)
		JOIN package_name pn ON pn.name = w.name
		ORDER BY pn.id, w.evra
		ON CONFLICT (name_id, evra) DO NOTHING`, pq.Array(names), pq.Array(evras)); err != nil {
		return fmt.Errorf("insert packages: %w", err)
	}
	res, err := tx.ExecContext(ctx, `
		INSERT INTO system_package (system_id, package_id)
		SELECT $1, p.id FROM unnest($2::text[], $3::text[]) AS w (name, evra)
		JOIN package_name pn ON pn.name = w.name
		JOIN package p ON p.name_id = pn.id AND p.evra = w.evra
		ORDER BY p.id
		ON CONFLICT DO NOTHING`, systemID, pq.Array(names), pq.Array(evras))
	if err != nil {
		return fmt.Errorf("insert system packages: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n != int64(len(names)) {
		return fmt.Errorf("stored %d of %d new packages", n, len(names))
	}
	return nil
}

// DeleteSystem removes a host and remembers it as deleted, so a late upload
// for it is ignored. Deleting a host twice, or one never seen, is fine; it
// reports alreadyDeleted when the host was remembered as deleted before this
// call, in which case it changed nothing. Hosts deleted longer than the
// store's deleted TTL ago are forgotten first, so a delete after that is a
// new one and is remembered for the TTL again.
func (s *Store) DeleteSystem(ctx context.Context, orgID, inventoryID string, eventTime time.Time) (alreadyDeleted bool, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM deleted_system WHERE deleted_at < now() - make_interval(secs => $1)`, s.deletedTTL.Seconds()); err != nil {
			return fmt.Errorf("forget old deleted hosts: %w", err)
		}
		res, err := tx.ExecContext(ctx, `
			INSERT INTO deleted_system (inventory_id, org_id, event_time) VALUES ($1, $2, $3)
			ON CONFLICT (inventory_id) DO NOTHING`, inventoryID, orgID, eventTime)
		if err != nil {
			return fmt.Errorf("remember deleted host: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("remember deleted host: %w", err)
		}
		alreadyDeleted = n == 0
		if _, err := tx.ExecContext(ctx, `
			DELETE FROM system s USING account a
			WHERE s.account_id = a.id AND a.org_id = $1 AND s.inventory_id = $2`, orgID, inventoryID); err != nil {
			return fmt.Errorf("delete system: %w", err)
		}
		return nil
	})
	return alreadyDeleted && err == nil, err
}
