// Package checker verifies, independently of the listener's code path, that
// the database holds what a stream of events should have produced: it reads
// the tables with its own SQL and compares every host with the final state
// loadgen expects and the evaluation the platform dataset computes.
package checker

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	_ "github.com/lib/pq" // the "postgres" driver

	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// Report is the outcome of a check.
type Report struct {
	Hosts       int // hosts the stream mentioned
	Present     int // hosts that must exist and do, with the right rows
	Empty       int // of Present, hosts stored without packages (and so without advisories), as expected
	Unevaluated int // hosts whose evaluation cannot succeed, not stored, as expected (a profile is stored with its evaluation)
	Deleted     int // hosts that must be gone and are
	Filtered    int // hosts whose every event was filtered out, absent as they must be
	Missing     int // hosts that must exist and do not: their events were lost
	Wrong       int // hosts whose rows differ from the expected state
	Examples    []string
	Advisories  int // system-advisory rows checked
	PackageRows int // system-package rows checked
}

// OK reports whether every host matched.
func (r Report) OK() bool { return r.Wrong == 0 && r.Missing == 0 }

func (r Report) String() string {
	return fmt.Sprintf("%d hosts: %d stored as expected (%d package rows, %d advisory rows; %d without packages, %d unevaluated), %d deleted and %d filtered out as expected, %d missing, %d wrong",
		r.Hosts, r.Present, r.PackageRows, r.Advisories, r.Empty, r.Unevaluated, r.Deleted, r.Filtered, r.Missing, r.Wrong)
}

// Check compares every expected host with the database, parallel at a time.
func Check(ctx context.Context, db *sql.DB, ds *platform.Dataset, shape platform.ProfileShape, expected map[string]*loadgen.HostState, parallel int) (Report, error) {
	hosts := slices.Sorted(maps.Keys(expected))
	q, err := schemaQueries(ctx, db)
	if err != nil {
		return Report{}, err
	}
	var (
		mu  sync.Mutex
		rep = Report{Hosts: len(hosts)}
		wg  sync.WaitGroup
	)
	work := make(chan string)
	errs := make(chan error, parallel)
	for w := 0; w < max(1, parallel); w++ {
		wg.Go(func() {
			for id := range work {
				problem, pkgs, advs, err := checkHost(ctx, db, q, ds, shape, expected[id])
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				switch {
				case problem == missing:
					rep.Missing++
					if len(rep.Examples) < 10 {
						rep.Examples = append(rep.Examples, id+": "+problem)
					}
				case problem != "":
					rep.Wrong++
					if len(rep.Examples) < 10 {
						rep.Examples = append(rep.Examples, id+": "+problem)
					}
				case expected[id].Deleted:
					rep.Deleted++
				case expected[id].Filtered:
					rep.Filtered++
				case expected[id].Unevaluated:
					rep.Unevaluated++
				default:
					rep.Present++
					if expected[id].NoPackages {
						rep.Empty++
					}
					rep.PackageRows += pkgs
					rep.Advisories += advs
				}
				mu.Unlock()
			}
		})
	}
feed:
	for _, id := range hosts {
		select {
		case work <- id:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return rep, err
}

const missing = "missing"

// hostQueries read one system's packages ("name-evra") and advisories
// (name, status) by its id.
type hostQueries struct{ packages, advisories string }

// schemaQueries returns the queries for the schema the database holds: the
// checker also checks databases of the listener from before schema version
// 2 (one row per system and package, and per system and advisory), in
// benchmarks that run it beside the current one.
func schemaQueries(ctx context.Context, db *sql.DB) (hostQueries, error) {
	var v1 bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('system_package') IS NOT NULL`).Scan(&v1); err != nil {
		return hostQueries{}, fmt.Errorf("which schema: %w", err)
	}
	if v1 {
		return hostQueries{
			packages: `SELECT pn.name || '-' || p.evra FROM system_package sp
				JOIN package p ON p.id = sp.package_id JOIN package_name pn ON pn.id = p.name_id
				WHERE sp.system_id = $1`,
			advisories: `SELECT a.name, sa.status FROM system_advisory sa JOIN advisory a ON a.id = sa.advisory_id
				WHERE sa.system_id = $1`,
		}, nil
	}
	return hostQueries{
		packages: `SELECT pn.name || '-' || p.evra FROM system s, unnest(s.package_ids) AS sp (id)
			JOIN package p ON p.id = sp.id JOIN package_name pn ON pn.id = p.name_id
			WHERE s.id = $1`,
		advisories: `SELECT a.name, CASE WHEN a.id = ANY (s.installable_advisory_ids) THEN 'installable' ELSE 'applicable' END
			FROM system s, unnest(s.advisory_ids) AS sa (id) JOIN advisory a ON a.id = sa.id
			WHERE s.id = $1`,
	}, nil
}

// checkHost returns a description of what is wrong, or "".
func checkHost(ctx context.Context, db *sql.DB, q hostQueries, ds *platform.Dataset, shape platform.ProfileShape, want *loadgen.HostState) (string, int, int, error) {
	var (
		id        int64
		lastEvent time.Time
		evaluated sql.NullTime
	)
	err := db.QueryRowContext(ctx, `
		SELECT s.id, s.last_event_time, s.last_evaluated_event_time FROM system s JOIN account a ON a.id = s.account_id
		WHERE a.org_id = $1 AND s.inventory_id = $2`, want.OrgID, want.HostID).Scan(&id, &lastEvent, &evaluated)
	if err == sql.ErrNoRows {
		if want.Deleted || want.Filtered || want.Unevaluated {
			return "", 0, 0, nil
		}
		return missing, 0, 0, nil
	}
	if err != nil {
		return "", 0, 0, err
	}
	if want.Deleted {
		return "deleted host still stored", 0, 0, nil
	}
	if want.Filtered {
		return "filtered host stored", 0, 0, nil
	}
	if want.Unevaluated {
		return "stored, but no evaluation of it can succeed (a profile is stored with its evaluation)", 0, 0, nil
	}
	if !lastEvent.Equal(want.EventTime) {
		return fmt.Sprintf("last event %v, want %v", lastEvent.UTC(), want.EventTime), 0, 0, nil
	}
	pkgs, err := queryStrings(ctx, db, q.packages, id)
	if err != nil {
		return "", 0, 0, err
	}
	profile := ds.ProfileAt(want.HostID, want.Revision, want.Changes, shape)
	if want.NoPackages {
		profile = platform.Profile{} // stored without packages: nothing installed, nothing applies
	}
	slices.Sort(pkgs)
	if !slices.Equal(pkgs, profile.Packages) {
		return fmt.Sprintf("%d packages stored, revision %d%s has %d (or they differ)", len(pkgs), want.Revision, changesText(want.Changes), len(profile.Packages)), 0, 0, nil
	}
	rows, err := db.QueryContext(ctx, q.advisories, id)
	if err != nil {
		return "", 0, 0, err
	}
	got := map[string]string{}
	for rows.Next() {
		var name, status string
		if err := rows.Scan(&name, &status); err != nil {
			rows.Close()
			return "", 0, 0, err
		}
		got[name] = status
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", 0, 0, err
	}
	wantAdv := ds.Evaluate(profile.Packages, profile.EnabledRepos()).Advisories
	if !maps.Equal(got, wantAdv) {
		return fmt.Sprintf("%d advisories stored, the dataset says %d (or they differ)", len(got), len(wantAdv)), 0, 0, nil
	}
	return "", len(pkgs), len(got), nil
}

// changesText names a host's small changes on top of its revision.
func changesText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" with %d small changes", n)
}

func queryStrings(ctx context.Context, db *sql.DB, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
