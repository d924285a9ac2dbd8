package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/messages"
)

// UploadCheck is what CheckUpload found about an upload before it is
// evaluated: whether storing it would apply it and, when not, the result
// StoreSystem would give. It is a hint read without locks; the store
// decides again, under the system row's lock.
type UploadCheck struct {
	Apply  bool
	Result UploadResult // when !Apply
	absent bool         // no row for the host: storing starts with the insert
}

// CheckUpload reads, in one query and without a transaction, whether u is
// newer than what is stored for its host and whether the host was deleted,
// so that an upload which would be ignored costs no evaluation.
func (s *Store) CheckUpload(ctx context.Context, u SystemUpload) (UploadCheck, error) {
	u.canonicalize()
	var (
		c                  UploadCheck
		deleted            bool
		id                 sql.NullInt64
		lastEvent          sql.NullTime
		lastEvaluatedEvent sql.NullTime
		serverStarted      time.Time
	)
	err := s.withConn(ctx, "check upload", func(conn *sql.Conn) error {
		return conn.QueryRowContext(ctx, checkUpload, u.OrgID, u.InventoryID).Scan(&deleted, &id, &lastEvent, &lastEvaluatedEvent, &serverStarted)
	})
	if err != nil {
		return c, fmt.Errorf("check upload: %w", err)
	}
	s.ids.seeServer(serverStarted)
	switch {
	case deleted:
		c.Result = UploadResult{Skipped: SkippedDeleted}
	case !id.Valid:
		c.Apply, c.absent = true, true
	case u.EventTime.After(lastEvent.Time):
		c.Apply = true
	default:
		c.Result = notNewer(id.Int64, u.EventTime, lastEvent.Time, lastEvaluatedEvent)
		c.Result.server = serverStarted
	}
	return c, nil
}

// checkUpload is CheckUpload's query, prepared (see preparedQueries). Its
// columns are cast so that their types stay those lib/pq prepared them with
// whatever a migration does to the table's.
const checkUpload = `
	SELECT EXISTS (SELECT 1 FROM deleted_system WHERE inventory_id = $2),
		s.id::bigint, s.last_event_time::timestamptz, s.last_evaluated_event_time::timestamptz,
		pg_postmaster_start_time()
	FROM (SELECT 1) AS one
	LEFT JOIN (system s JOIN account a ON a.id = s.account_id AND a.org_id = $1) ON s.inventory_id = $2`

// notNewer is the result for an upload at eventTime of a host stored at lastEvent.
func notNewer(id int64, eventTime, lastEvent time.Time, lastEvaluatedEvent sql.NullTime) UploadResult {
	res := UploadResult{SystemID: id, Skipped: SkippedOlder, EventTime: lastEvent}
	if eventTime.Equal(lastEvent) {
		res.Skipped = SkippedSameEvent
	}
	res.NeedsEvaluation = !lastEvaluatedEvent.Valid || lastEvaluatedEvent.Time.Before(lastEvent)
	return res
}

// StoreSystem stores an upload's profile without an evaluation (which
// StoreEvaluation adds). It is idempotent: an upload not newer than the last
// applied event of the host, or for a host deleted recently, changes nothing.
func (s *Store) StoreSystem(ctx context.Context, u SystemUpload) (UploadResult, error) {
	return s.store(ctx, u, nil, false)
}

// StoreEvaluatedSystem stores an upload together with its evaluation, in
// one transaction: the profile, its packages, its advisories, the counts.
// check is CheckUpload's answer for u (a hint: the decision is taken again
// under the row's lock). Applying it twice, or after a newer upload, or
// after the host's delete, changes nothing.
func (s *Store) StoreEvaluatedSystem(ctx context.Context, u SystemUpload, e Evaluation, check UploadCheck) (UploadResult, error) {
	return s.store(ctx, u, &e, check.absent)
}

// store is StoreSystem (e nil) and StoreEvaluatedSystem. The shared rows
// (account, packages, advisories) are resolved first, mostly from the id
// cache; then one statement that commits by itself: for a host not stored
// yet (absent) an INSERT, otherwise an UPDATE conditional on the upload
// being newer. Only when that statement writes nothing does a transaction
// lock the system row and decide why (or write, when the host appeared or
// went meanwhile).
func (s *Store) store(ctx context.Context, u SystemUpload, e *Evaluation, absent bool) (UploadResult, error) {
	u.canonicalize()
	sum := u.checksum()
	var ev *evaluationRow
	if e != nil {
		ev = newEvaluationRow(*e)
	}
	var (
		res             UploadResult
		notifiedAccount int
		notifiedIDs     []int32    // the evaluation's installable advisories, notified once it commits
		notifiedView    serverView // the view the write resolved its ids under
	)
	err := s.withConn(ctx, "store system", func(conn *sql.Conn) error {
		res = UploadResult{}
		view := s.ids.view()
		accountID, err := s.ids.accountID(ctx, conn, view, u.OrgID)
		if err != nil {
			return err
		}
		pkgIDs, err := s.ids.packageIDs(ctx, conn, view, u.Packages)
		if err != nil {
			return err
		}
		var advIDs, installableIDs []int32
		if ev != nil {
			ids, err := s.ids.advisoryIDs(ctx, conn, view, ev.names, ev.types)
			if err != nil {
				return err
			}
			advIDs, installableIDs = ev.ids(ids)
		}
		w := systemWrite{accountID: accountID, u: &u, sum: sum, pkgIDs: pkgIDs, ev: ev, advIDs: advIDs, installableIDs: installableIDs,
			ids: s.ids, view: view}
		if e != nil && !e.Effects.empty() {
			w.fx = effectsWrite{e: e.Effects, inventoryID: strings.ToLower(u.InventoryID), orgID: u.OrgID, accountID: accountID,
				installable: s.ids.notified.unknown(accountID, installableIDs), evaluated: true}
			if w.fx.remediation, err = s.resolveRemediation(ctx, conn, view, w.fx.inventoryID, ev, advIDs, e.Effects.Remediation); err != nil {
				return err
			}
			notifiedAccount, notifiedIDs, notifiedView = accountID, installableIDs, view
		}
		if absent {
			id, err := w.insertLocked(ctx, conn)
			if err != nil {
				return err
			}
			if id != 0 {
				res = UploadResult{SystemID: id, Applied: true, NeedsEvaluation: ev == nil, EventTime: u.EventTime, server: view.started}
				return nil
			}
			// Stored meanwhile, or deleted: the transaction below decides.
		} else {
			id, err := w.updateIfNewerWithEffects(ctx, conn)
			if err != nil {
				return err
			}
			if id != 0 {
				res = UploadResult{SystemID: id, Applied: true, NeedsEvaluation: ev == nil, EventTime: u.EventTime, server: view.started}
				return nil
			}
			// Not newer after all, deleted, or gone: the transaction below decides.
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		if res, err = w.apply(ctx, tx); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		res.server = view.started // apply confirmed it
		return nil
	})
	if err == nil && res.Applied && e != nil && !e.Effects.empty() {
		if e.Effects.Notify != nil {
			s.ids.notifiedCommitted(notifiedView, notifiedAccount, notifiedIDs)
		}
		s.outboxWritten()
	}
	return res, err
}

// systemWrite is one upload ready to be written: its shared rows resolved.
type systemWrite struct {
	accountID      int
	u              *SystemUpload
	sum            string
	pkgIDs         []int64
	ev             *evaluationRow // nil: the profile alone, not evaluated
	advIDs         []int32
	installableIDs []int32
	// fx are the evaluation's effects, written in the transaction that
	// applies the upload (zero: none).
	fx effectsWrite
	// ids resolved the ids above under view; every write checks, in its
	// transaction, that it writes to that server (confirm). Nil: the ids
	// are none of the cache's.
	ids  *idCache
	view serverView
}

// confirm fails the write unless the server it writes to, started at
// started, is the one its ids were resolved on (idCache.confirm).
func (w *systemWrite) confirm(started time.Time) error {
	if w.ids == nil {
		return nil
	}
	return w.ids.confirm(w.view, started)
}

// hostLockClass names patchflow's space of advisory locks, one per host
// (the second key is a hash of the inventory id); golang-migrate's lock,
// a single bigint, lives in another space.
const hostLockClass = 1885693542

// lockHost takes the host's advisory lock until tx ends, and returns when
// the server started (for systemWrite.confirm). A delete and an insert of
// the same host take it before anything else: the insert checks
// deleted_system with a snapshot taken when its statement starts, and were
// that before the delete's commit, an insert waiting for the delete's row
// would go ahead once it committed and bring the host back (two owners of
// a partition during a rebalance). Updates need no lock: they wait for the
// row, and PostgreSQL checks their condition again on its newest version.
func lockHost(ctx context.Context, tx *sql.Tx, inventoryID string) (serverStarted time.Time, err error) {
	var locked string
	if err := tx.QueryRowContext(ctx, lockHostQuery, hostLockClass, inventoryID).Scan(&locked, &serverStarted); err != nil {
		return time.Time{}, fmt.Errorf("lock host: %w", err)
	}
	return serverStarted, nil
}

// lockHostQuery is lockHost's statement, prepared (see preparedQueries).
const lockHostQuery = `SELECT pg_advisory_xact_lock($1::int, hashtext($2::text))::text, pg_postmaster_start_time()`

// insertLocked is insert in a transaction of its own, under the host's lock.
func (w *systemWrite) insertLocked(ctx context.Context, conn *sql.Conn) (int64, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	started, err := lockHost(ctx, tx, w.u.InventoryID)
	if err != nil {
		return 0, err
	}
	if err := w.confirm(started); err != nil {
		return 0, err
	}
	id, err := w.insertWithEffects(ctx, tx)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return id, nil
}

// insert stores a host not stored yet, with its evaluation when there is
// one, and returns its id; 0 when the host is stored already or was deleted.
// It runs in a transaction holding the host's lock (lockHost).
func (w *systemWrite) insert(ctx context.Context, q *sql.Tx) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, insertSystem, w.insertArgs()...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("insert system: %w", err)
	}
	return id, nil
}

// insertWithEffects is insert, and the effects written in the same
// statement when there are any (effectsStatement).
func (w *systemWrite) insertWithEffects(ctx context.Context, tx *sql.Tx) (int64, error) {
	if w.fx.e.empty() {
		return w.insert(ctx, tx)
	}
	query, fx, err := w.fx.statement(insertSystemWithEffects, insertSystemWithEffectsNoNotify)
	if err != nil {
		return 0, err
	}
	var id int64
	var n int
	err = tx.QueryRowContext(ctx, query, append(w.insertArgs(), fx...)...).Scan(&id, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("insert system and outbox: %w", err)
	}
	if afterEffects != nil {
		if err := afterEffects(); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// insertArgs are the parameters of insertSystem.
func (w *systemWrite) insertArgs() []any {
	u, ev := w.u, w.ev
	var c evaluationCounts
	if ev != nil {
		c = ev.counts
	}
	return []any{w.accountID, u.InventoryID, u.DisplayName, u.Reporter, u.Arch, u.HostType, u.OSName, u.OSMajor, u.OSMinor,
		u.Releasever, u.RHSMVersion, pq.Array(u.Repos), pq.Array(u.moduleStrings()), w.sum, u.StaleTimestamp, u.CulledTimestamp,
		u.LastUpload, u.EventTime, u.RequestID, len(u.Packages), pq.Array(w.pkgIDs),
		pq.Array(nonNil(w.advIDs)), pq.Array(nonNil(w.installableIDs)),
		ev != nil, c.installable, c.applicable, c.security, c.bugfix, c.enhancement, c.updatable}
}

// insertSystem is insert's statement, prepared (see preparedQueries).
const insertSystem = `
		INSERT INTO system (account_id, inventory_id, display_name, reporter, arch, host_type, os_name, os_major, os_minor,
			releasever, rhsm_version, repos, modules, profile_checksum, stale_timestamp, culled_timestamp,
			last_upload, last_event_time, last_request_id, packages_installed, package_ids,
			advisory_ids, installable_advisory_ids, advisory_first_reported,
			last_evaluation, last_evaluated_event_time, installable_advisories, applicable_advisories,
			security_advisories, bugfix_advisories, enhancement_advisories, packages_updatable)
		SELECT $1::int, $2::uuid, $3::text, $4::text, $5::text, $6::text, $7::text, $8::int, $9::int,
			$10::text, $11::text, $12::text[], $13::text[], $14::text, $15::timestamptz, $16::timestamptz,
			$17::timestamptz, $18::timestamptz, $19::text, $20::int, $21::bigint[],
			$22::int[], $23::int[], array_fill(now(), ARRAY[cardinality($22::int[])]),
			CASE WHEN $24::bool THEN now() END, CASE WHEN $24::bool THEN $18::timestamptz END, $25::int, $26::int,
			$27::int, $28::int, $29::int, $30::int
		WHERE NOT EXISTS (SELECT 1 FROM deleted_system WHERE inventory_id = $2::uuid)
		ON CONFLICT (account_id, inventory_id) DO NOTHING
		RETURNING id::bigint`

// apply decides and writes under the system row's lock, in tx.
func (w *systemWrite) apply(ctx context.Context, tx *sql.Tx) (UploadResult, error) {
	u := w.u
	var (
		id                 int64
		lastEvent          time.Time
		lastEvaluatedEvent sql.NullTime
		deleted            bool
	)
	started, err := lockHost(ctx, tx, u.InventoryID)
	if err != nil {
		return UploadResult{}, err
	}
	if err := w.confirm(started); err != nil {
		return UploadResult{}, err
	}
	err = tx.QueryRowContext(ctx, `
		SELECT s.id, s.last_event_time, s.last_evaluated_event_time,
			EXISTS (SELECT 1 FROM deleted_system WHERE inventory_id = $2)
		FROM system s WHERE s.account_id = $1 AND s.inventory_id = $2 FOR UPDATE OF s`,
		w.accountID, u.InventoryID).Scan(&id, &lastEvent, &lastEvaluatedEvent, &deleted)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		id, err := w.insert(ctx, tx)
		if err != nil {
			return UploadResult{}, err
		}
		if id != 0 {
			if err := w.fx.write(ctx, tx, id); err != nil {
				return UploadResult{}, err
			}
			return UploadResult{SystemID: id, Applied: true, NeedsEvaluation: w.ev == nil, EventTime: u.EventTime}, nil
		}
		var deleted bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM deleted_system WHERE inventory_id = $1)`,
			u.InventoryID).Scan(&deleted); err != nil {
			return UploadResult{}, fmt.Errorf("check deleted hosts: %w", err)
		}
		if deleted {
			return UploadResult{Skipped: SkippedDeleted}, nil
		}
		// Inserted by another transaction after this one's lookup (two
		// owners of a partition during a rebalance): the retry finds it.
		return UploadResult{}, messages.Transient(errors.New("the host was stored concurrently by another transaction"))
	case err != nil:
		return UploadResult{}, fmt.Errorf("lock system: %w", err)
	case deleted:
		return UploadResult{Skipped: SkippedDeleted}, nil
	case !u.EventTime.After(lastEvent):
		return notNewer(id, u.EventTime, lastEvent, lastEvaluatedEvent), nil
	}
	if err := w.update(ctx, tx, id); err != nil {
		return UploadResult{}, err
	}
	if err := w.fx.write(ctx, tx, id); err != nil {
		return UploadResult{}, err
	}
	return UploadResult{SystemID: id, Applied: true, NeedsEvaluation: w.ev == nil, EventTime: u.EventTime}, nil
}

// update writes a newer upload over a stored host. The arrays are written
// only when they change (packages: when the profile's checksum does; the
// advisories: when their ids or statuses do), so that an unchanged
// re-check-in leaves the TOASTed arrays and their GIN index entries alone
// and the update can be HOT. SET expressions read the row's old values.
func (w *systemWrite) update(ctx context.Context, tx *sql.Tx, id int64) error {
	if _, err := tx.ExecContext(ctx, updateSystem, w.updateArgs(id)...); err != nil {
		return fmt.Errorf("update system: %w", err)
	}
	return nil
}

// updateIfNewer is update in one statement that commits by itself, for a
// host stored already: it writes only when the upload is newer than the
// stored event and the host was not deleted, and returns the system's id;
// 0 when it wrote nothing (the transaction then finds out why). A
// concurrent update of the row makes PostgreSQL check the condition again
// on the row's newest version.
func (w *systemWrite) updateIfNewer(ctx context.Context, conn rowQueryer) (int64, error) {
	// The statement checks the server; the cache's generation is checked
	// here, after every id was read: an unchanged one means each was read
	// from the view's server.
	if w.ids != nil && !w.ids.unchangedSince(w.view) {
		return 0, errServerChanged
	}
	var id int64
	args := append(w.updateArgs(w.u.InventoryID), w.accountID, w.view.started)
	err := conn.QueryRowContext(ctx, updateNewerSystem, args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("update system: %w", err)
	}
	return id, nil
}

// rowQueryer runs a query of one row: a connection or a transaction.
type rowQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// updateIfNewerWithEffects is updateIfNewer, and the effects written in
// the same statement when there are any (effectsStatement): it commits by
// itself, in one round trip, with the effects as without.
func (w *systemWrite) updateIfNewerWithEffects(ctx context.Context, conn *sql.Conn) (int64, error) {
	if w.fx.e.empty() {
		return w.updateIfNewer(ctx, conn)
	}
	if updateEffectsApart != nil {
		return updateEffectsApart(w, ctx, conn)
	}
	// As updateIfNewer: the statement checks the server, this the cache.
	if w.ids != nil && !w.ids.unchangedSince(w.view) {
		return 0, errServerChanged
	}
	query, fx, err := w.fx.statement(updateNewerSystemWithEffects, updateNewerSystemWithEffectsNoNotify)
	if err != nil {
		return 0, err
	}
	args := append(w.updateArgs(w.u.InventoryID), w.accountID, w.view.started)
	var id int64
	var n int
	err = conn.QueryRowContext(ctx, query, append(args, fx...)...).Scan(&id, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("update system and outbox: %w", err)
	}
	return id, nil
}

// updateEffectsApart, when set (by a benchmark), writes an update and its
// effects instead of updateIfNewerWithEffects, to compare another way.
var updateEffectsApart func(w *systemWrite, ctx context.Context, conn *sql.Conn) (int64, error)

// updateArgs are the parameters of updateSystem and updateNewerSystem;
// first is the system's id or, for updateNewerSystem, its inventory id.
func (w *systemWrite) updateArgs(first any) []any {
	u, ev := w.u, w.ev
	var c evaluationCounts
	if ev != nil {
		c = ev.counts
	}
	return []any{first, u.DisplayName, u.Reporter, u.Arch, u.HostType, u.OSName, u.OSMajor, u.OSMinor, u.Releasever, u.RHSMVersion,
		pq.Array(u.Repos), pq.Array(u.moduleStrings()), w.sum, u.StaleTimestamp, u.CulledTimestamp, u.LastUpload,
		u.EventTime, u.RequestID, len(u.Packages), pq.Array(w.pkgIDs),
		ev != nil, pq.Array(nonNil(w.advIDs)), pq.Array(nonNil(w.installableIDs)),
		c.installable, c.applicable, c.security, c.bugfix, c.enhancement, c.updatable}
}

// evaluationSet returns the SET list that stores an evaluation, its
// parameters numbered from first: whether there is one ($first), the
// advisory ids and the installable ones among them, then the six counts;
// evaluated numbers the parameter holding the evaluated event's time. It is
// shared by the upload's update and StoreEvaluation. An advisory kept keeps
// its first_reported; a new one is reported now.
func evaluationSet(first, evaluated int) string {
	return fmt.Sprintf(`
			advisory_first_reported = CASE WHEN NOT $%[1]d::bool OR advisory_ids = $%[2]d::int[] THEN advisory_first_reported
				ELSE ARRAY(SELECT COALESCE(o.first_reported, now())
					FROM unnest($%[2]d::int[]) WITH ORDINALITY AS n (id, i)
					LEFT JOIN unnest(advisory_ids, advisory_first_reported) AS o (id, first_reported) ON o.id = n.id
					ORDER BY n.i) END,
			advisory_ids = CASE WHEN NOT $%[1]d::bool OR advisory_ids = $%[2]d::int[] THEN advisory_ids ELSE $%[2]d::int[] END,
			installable_advisory_ids = CASE WHEN NOT $%[1]d::bool OR installable_advisory_ids = $%[3]d::int[]
				THEN installable_advisory_ids ELSE $%[3]d::int[] END,
			last_evaluation = CASE WHEN $%[1]d::bool THEN now() ELSE last_evaluation END,
			last_evaluated_event_time = CASE WHEN $%[1]d::bool THEN $%[10]d::timestamptz ELSE last_evaluated_event_time END,
			installable_advisories = CASE WHEN $%[1]d::bool THEN $%[4]d::int ELSE installable_advisories END,
			applicable_advisories = CASE WHEN $%[1]d::bool THEN $%[5]d::int ELSE applicable_advisories END,
			security_advisories = CASE WHEN $%[1]d::bool THEN $%[6]d::int ELSE security_advisories END,
			bugfix_advisories = CASE WHEN $%[1]d::bool THEN $%[7]d::int ELSE bugfix_advisories END,
			enhancement_advisories = CASE WHEN $%[1]d::bool THEN $%[8]d::int ELSE enhancement_advisories END,
			packages_updatable = CASE WHEN $%[1]d::bool THEN $%[9]d::int ELSE packages_updatable END`,
		first, first+1, first+2, first+3, first+4, first+5, first+6, first+7, first+8, evaluated)
}

// systemSet is the SET list of an upload's update; its evaluation's
// parameters start at $21.
var systemSet = `
		UPDATE system SET display_name = $2, reporter = $3, arch = $4, host_type = $5, os_name = $6, os_major = $7,
			os_minor = $8, releasever = $9, rhsm_version = $10, repos = $11, modules = $12,
			package_ids = CASE WHEN profile_checksum = $13 THEN package_ids ELSE $20::bigint[] END,
			profile_checksum = $13, stale_timestamp = $14, culled_timestamp = $15, last_upload = $16,
			last_event_time = $17, last_request_id = $18, packages_installed = $19,` + evaluationSet(21, 17)

// updateSystem updates the system whose id is $1.
var updateSystem = systemSet + `
		WHERE id = $1`

// updateNewerSystem updates the system of inventory id $1 in account $30
// when the upload is newer than what is stored and the host not deleted,
// on the server started at $31, the one the ids were resolved on (on
// another, it writes nothing, and the transaction that then decides why
// finds the server changed: systemWrite.confirm). updateIfNewer checks
// the cache's generation before it.
var updateNewerSystem = systemSet + `
		WHERE inventory_id = $1::uuid AND account_id = $30::int AND last_event_time < $17::timestamptz
			AND NOT EXISTS (SELECT 1 FROM deleted_system WHERE inventory_id = $1::uuid)
			AND pg_postmaster_start_time() = $31::timestamptz
		RETURNING id::bigint`

// nonNil keeps an empty list from being stored as NULL in a NOT NULL column.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// DeleteSystem removes a host and remembers it as deleted, so a late upload
// for it is ignored. Deleting a host twice, or one never seen, is fine; it
// reports alreadyDeleted when the host was remembered as deleted before this
// call, in which case it changed nothing. Hosts deleted longer than the
// store's deleted TTL ago are forgotten first, so a delete after that is a
// new one and is remembered for the TTL again.
func (s *Store) DeleteSystem(ctx context.Context, orgID, inventoryID string, eventTime time.Time) (alreadyDeleted bool, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		alreadyDeleted, err = s.deleteSystem(ctx, tx, orgID, inventoryID, eventTime)
		return err
	})
	return alreadyDeleted && err == nil, err
}

// deleteSystem is DeleteSystem's work in tx, the host's lock first.
func (s *Store) deleteSystem(ctx context.Context, tx *sql.Tx, orgID, inventoryID string, eventTime time.Time) (alreadyDeleted bool, err error) {
	if _, err := lockHost(ctx, tx, inventoryID); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx,
		`DELETE FROM deleted_system WHERE deleted_at < now() - make_interval(secs => $1)`, s.deletedTTL.Seconds()); err != nil {
		return false, fmt.Errorf("forget old deleted hosts: %w", err)
	}
	res, err := tx.ExecContext(ctx, `
		INSERT INTO deleted_system (inventory_id, org_id, event_time) VALUES ($1, $2, $3)
		ON CONFLICT (inventory_id) DO NOTHING`, inventoryID, orgID, eventTime)
	if err != nil {
		return false, fmt.Errorf("remember deleted host: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("remember deleted host: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `
		DELETE FROM system s USING account a
		WHERE s.account_id = a.id AND a.org_id = $1 AND s.inventory_id = $2`, orgID, inventoryID); err != nil {
		return false, fmt.Errorf("delete system: %w", err)
	}
	return n == 0, nil
}
