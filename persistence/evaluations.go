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

// evaluationCounts are the per-system counts an evaluation sets.
type evaluationCounts struct {
	installable, applicable, security, bugfix, enhancement, updatable int
}

// evaluationRow is an evaluation ready to store: its advisories sorted by
// name and unique, and its counts.
type evaluationRow struct {
	names, types []string
	installable  map[string]bool
	counts       evaluationCounts
}

func newEvaluationRow(e Evaluation) *evaluationRow {
	advs := slices.Clone(e.Advisories)
	slices.SortFunc(advs, func(a, b AdvisoryResult) int { return strings.Compare(a.Name, b.Name) })
	advs = slices.CompactFunc(advs, func(a, b AdvisoryResult) bool { return a.Name == b.Name })
	r := &evaluationRow{names: make([]string, len(advs)), types: make([]string, len(advs)), installable: map[string]bool{}}
	r.counts.updatable = e.PackagesUpdatable
	for i, a := range advs {
		r.names[i], r.types[i] = a.Name, a.Type
		if a.Status == Installable {
			r.installable[a.Name] = true
			r.counts.installable++
		} else {
			r.counts.applicable++
		}
		switch a.Type {
		case "security":
			r.counts.security++
		case "bugfix":
			r.counts.bugfix++
		case "enhancement":
			r.counts.enhancement++
		}
	}
	return r
}

// ids returns the evaluation's advisory ids and the installable ones among
// them, each sorted, given the ids of its advisories' names.
func (r *evaluationRow) ids(byName map[string]int32) (all, installable []int32) {
	all = make([]int32, 0, len(r.names))
	for _, n := range r.names {
		id := byName[n]
		all = append(all, id)
		if r.installable[n] {
			installable = append(installable, id)
		}
	}
	slices.Sort(all)
	slices.Sort(installable)
	return all, installable
}

// updateEvaluation stores an evaluation of the stored profile; the
// evaluation's parameters start at $2, the evaluated event is $11.
var updateEvaluation = `UPDATE system SET` + evaluationSet(2, 11) + `
		WHERE id = $1`

// StoreEvaluation stores the advisories of the system's profile that res
// (StoreSystem's result, or CheckUpload's) names: its SystemID, uploaded
// at its EventTime. It writes in one transaction the advisory ids and
// statuses, the counts, the last evaluation and e.Effects (which name the
// host: OrgID and InventoryID). When a newer upload was stored meanwhile,
// or the host was deleted, it stores nothing: that upload is evaluated on
// its own. It reports whether it stored. A server other than the one res
// was read on (a failover or a restore since) may have given its system id
// to another host: it then fails, transiently, and the retry stores the
// upload again.
func (s *Store) StoreEvaluation(ctx context.Context, res UploadResult, e Evaluation) (bool, error) {
	ev := newEvaluationRow(e)
	systemID, eventTime := res.SystemID, res.EventTime.Round(time.Microsecond)
	stored := false
	var (
		notifiedAccount int
		notifiedIDs     []int32    // the evaluation's installable advisories, notified once it commits
		notifiedView    serverView // the view the write resolved its ids under
	)
	err := s.withConn(ctx, "store evaluation", func(conn *sql.Conn) error {
		stored = false
		view := s.ids.view()
		byName, err := s.ids.advisoryIDs(ctx, conn, view, ev.names, ev.types)
		if err != nil {
			return err
		}
		all, installable := ev.ids(byName)
		var rem *remediationWrite
		if !e.Effects.empty() {
			if rem, err = s.resolveRemediation(ctx, conn, view, strings.ToLower(e.Effects.InventoryID), ev, all, e.Effects.Remediation); err != nil {
				return err
			}
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		var (
			lastEvent     time.Time
			accountID     int
			serverStarted time.Time
		)
		err = tx.QueryRowContext(ctx, `SELECT last_event_time, account_id, pg_postmaster_start_time() FROM system WHERE id = $1 FOR UPDATE`,
			systemID).Scan(&lastEvent, &accountID, &serverStarted)
		if errors.Is(err, sql.ErrNoRows) { // deleted meanwhile, or an id of the server before this one
			if err := tx.QueryRowContext(ctx, `SELECT pg_postmaster_start_time()`).Scan(&serverStarted); err != nil {
				return fmt.Errorf("lock system: %w", err)
			}
			return s.ids.confirmRead(res.server, serverStarted)
		}
		if err != nil {
			return fmt.Errorf("lock system: %w", err)
		}
		if err := s.ids.confirmRead(res.server, serverStarted); err != nil {
			return err
		}
		if !lastEvent.Equal(eventTime) {
			return nil // a newer upload will be evaluated
		}
		fx := e.Effects
		var unknownIDs []int32
		if !fx.empty() {
			unknownIDs = s.ids.notified.unknown(accountID, installable)
			notifiedAccount, notifiedIDs, notifiedView = accountID, installable, view
		}
		if err := s.ids.confirm(view, serverStarted); err != nil {
			return err
		}
		c := ev.counts
		if _, err := tx.ExecContext(ctx, updateEvaluation, systemID, true, pq.Array(nonNil(all)), pq.Array(nonNil(installable)),
			c.installable, c.applicable, c.security, c.bugfix, c.enhancement, c.updatable, eventTime); err != nil {
			return fmt.Errorf("update system evaluation: %w", err)
		}
		if !fx.empty() {
			w := effectsWrite{e: fx, inventoryID: strings.ToLower(fx.InventoryID), orgID: fx.OrgID, accountID: accountID,
				installable: unknownIDs, evaluated: true, remediation: rem}
			if err := w.write(ctx, tx, systemID); err != nil {
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		stored = true
		return nil
	})
	if err == nil && stored && !e.Effects.empty() {
		if e.Effects.Notify != nil {
			s.ids.notifiedCommitted(notifiedView, notifiedAccount, notifiedIDs)
		}
		s.outboxWritten()
	}
	return stored, err
}
