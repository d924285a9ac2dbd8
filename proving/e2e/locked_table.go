package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/patchflow/patchflow/proving/platform"
)

// A migration's lock: the system table held in ACCESS EXCLUSIVE mode for
// longer than the listeners' attempt deadline, while records flow. Every
// event's statements wait on it until their attempt ends (57014), while an
// empty query (the old health check) still passes: an outage of what the
// records need. Nothing may be dead-lettered, nothing lost, and the
// throughput must be back within a second of the release (the waiting
// records retry at once, not at the end of their backoff). Run twice: eight
// busy partitions in key order, and one partition in partition order,
// where a single record in flight has only the health check to tell its
// trouble from the lock.

// lockedTableHold is how long the lock is held: past the own-failure bound
// of lockedTableEnv (3 attempts of 3 s, backoff under 2 s: about 15 s).
const lockedTableHold = 20 * time.Second

// lockedTableEnv gives the listeners a short attempt deadline, so that the
// lock outlasts several attempts of each record, and few of them.
var lockedTableEnv = []string{kv("LISTENER_ATTEMPT_TIMEOUT", "3s"), kv("LISTENER_MAX_ATTEMPTS", "3")}

// vmaasOutageScenario is the recovery measurement: VMaaS at a fixed 50 ms,
// then answering 503 to every call for 10 s, 40,000 events, one listener at
// its default backoff (up to 10 s). The throughput must be back within a
// second of VMaaS serving again, and nothing dead-lettered.
func vmaasOutageScenario() Scenario {
	// 40,000 events: a listener at 2,000 records/s had only 5,000 of 20,000
	// left once the outage ended (the fault at a fifth, then 5 s measured),
	// too few to show its throughput back.
	return Scenario{Name: "vmaas-outage", Events: 40000, Hosts: 10000, Listeners: 1, NoDeadLetters: true, StatusPorts: true,
		MockLatency: "fixed:50ms", ListenerEnv: []string{kv("LISTENER_BACKOFF_MAX", "10s")}, Judge: judgeRecovery,
		Faults: []Fault{{0.2, "VMaaS 503 to every call for 10 s", func(r *run) error {
			before, err := r.finishedRate(5 * time.Second)
			if err != nil {
				return err
			}
			if err := r.setFaults(platform.Faults{ErrorRate: 1, Latency: "fixed:50ms"}); err != nil {
				return err
			}
			r.markTrouble(true)
			r.wait(10 * time.Second)
			if err := r.setFaults(platform.Faults{Latency: "fixed:50ms"}); err != nil {
				return err
			}
			recovered := time.Now()
			r.markTrouble(false)
			back, err := r.throughputBack(recovered, before, 30*time.Second)
			if err != nil {
				return err
			}
			r.recovery = &recoveryRecord{before: before, back: back, curve: strings.Join(r.curve, ", ")}
			return nil
		}}}}
}

func lockedTableScenarios() []Scenario {
	busy := Scenario{Name: "locked-table", Events: 4000, Hosts: 2000, Listeners: 2, NoDeadLetters: true, StatusPorts: true,
		StreamFor: 40 * time.Second, ListenerEnv: lockedTableEnv, Judge: judgeRecovery,
		Faults: []Fault{{0.25, fmt.Sprintf("LOCK TABLE system IN ACCESS EXCLUSIVE MODE for %v", lockedTableHold), lockSystemTable(lockedTableHold)}}}
	one := Scenario{Name: "locked-table-1p", Events: 500, Hosts: 250, Listeners: 1, Partitions: 1, NoDeadLetters: true, StatusPorts: true,
		StreamFor: 50 * time.Second, ListenerEnv: append([]string{kv("LISTENER_ORDERING", "partition")}, lockedTableEnv...), Judge: judgeRecovery,
		Faults: []Fault{{0.25, fmt.Sprintf("LOCK TABLE system IN ACCESS EXCLUSIVE MODE for %v", lockedTableHold), lockSystemTable(lockedTableHold)}}}
	return []Scenario{busy, one}
}

// lockSystemTable holds the system table locked for hold, on a connection
// of its own to the scenario's database (not through a fault proxy), and
// measures the listeners' throughput before the lock and after its release.
func lockSystemTable(hold time.Duration) func(r *run) error {
	return func(r *run) error {
		before, err := r.finishedRate(5 * time.Second)
		if err != nil {
			return err
		}
		release, err := r.lockTable()
		if err != nil {
			return err
		}
		r.markTrouble(true)
		r.wait(hold)
		if err := release(); err != nil {
			return err
		}
		released := time.Now()
		r.markTrouble(false)
		back, err := r.throughputBack(released, before, 10*time.Second)
		if err != nil {
			return err
		}
		r.recovery = &recoveryRecord{before: before, back: back, curve: strings.Join(r.curve, ", ")}
		return nil
	}
}

// lockTable locks the system table in ACCESS EXCLUSIVE mode, as a
// migration does, on a connection of its own to the scenario's database
// (not through a fault proxy), until release is called.
func (r *run) lockTable() (release func() error, err error) {
	db, err := sql.Open("postgres", r.dbURL)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		db.Close()
		return nil, err
	}
	// ACCESS EXCLUSIVE waits for the transactions on the table to end, as
	// a migration's would; they are short.
	_, err = tx.ExecContext(ctx, "SET LOCAL lock_timeout = '10s'")
	if err == nil {
		_, err = tx.ExecContext(ctx, "LOCK TABLE system IN ACCESS EXCLUSIVE MODE")
	}
	if err != nil {
		_ = tx.Rollback()
		db.Close()
		return nil, fmt.Errorf("lock the system table: %w", err)
	}
	return func() error {
		defer db.Close()
		if err := tx.Rollback(); err != nil {
			return fmt.Errorf("release the lock on the system table: %w", err)
		}
		return nil
	}, nil
}

// recoveryRecord is what the locked-table fault measured, for its judge.
type recoveryRecord struct {
	before float64       // records finished per second before the lock
	back   time.Duration // from the release until a second ran at ≥ recoveredShare of before; -1: never, within the watch
	// curve is what the listeners finished in each 100 ms of the first
	// 3 s after the release, with the first listener's limit.
	curve string
}

// recoveredShare is the share of the throughput before a fault at which
// it counts as back.
const recoveredShare = 0.8

// finished is what every live listener finished (succeeded, skipped or
// dead-lettered), from their /status.json.
func (r *run) finished() (int64, error) {
	var n int64
	for _, p := range r.live() {
		st, err := readStatus(p.status)
		if err != nil {
			return 0, err
		}
		n += st.Totals.Succeeded + st.Totals.Skipped + st.Totals.DeadLettered
	}
	return n, nil
}

// finishedRate measures the listeners' records per second over d.
func (r *run) finishedRate(d time.Duration) (float64, error) {
	from, err := r.finished()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	r.wait(d)
	to, err := r.finished()
	if err != nil {
		return 0, err
	}
	return float64(to-from) / time.Since(start).Seconds(), nil
}

// throughputBack samples what the listeners finish every 100 ms from
// released on, for at most watch, and returns how long after released the
// first one-second window began in which they finished at least
// recoveredShare × before records; -1 when none did within the watch.
func (r *run) throughputBack(released time.Time, before float64, watch time.Duration) (time.Duration, error) {
	type point struct {
		at time.Time
		n  int64
	}
	var points []point
	back := time.Duration(-1)
	for time.Since(released) < watch && (back < 0 || time.Since(released) < 3*time.Second) {
		n, err := r.finished()
		if err != nil {
			return 0, err
		}
		now := time.Now()
		points = append(points, point{now, n})
		if len(points) > 1 && now.Sub(released) <= 3*time.Second {
			limit := -1
			if live := r.live(); len(live) > 0 {
				if st, err := readStatus(live[0].status); err == nil {
					limit = st.Concurrency.Limit
				}
			}
			r.curve = append(r.curve, fmt.Sprintf("%.1fs +%d (limit %d)", now.Sub(released).Seconds(), n-points[len(points)-2].n, limit))
		}
		for _, p := range points {
			if back < 0 && now.Sub(p.at) >= time.Second && float64(n-p.n) >= recoveredShare*before*now.Sub(p.at).Seconds() {
				back = p.at.Sub(released)
			}
		}
		time.Sleep(100 * time.Millisecond)
		r.look()
	}
	return back, nil
}

// judgeRecovery: the throughput was back within a second of the release.
func judgeRecovery(r *run, line *Line) error {
	rec := r.recovery
	if rec == nil {
		line.Problems = append(line.Problems, "the recovery was not measured")
		return nil
	}
	if rec.back < 0 {
		line.Problems = append(line.Problems, fmt.Sprintf("throughput not back to %.0f%% of %.1f records/s within the watch", 100*recoveredShare, rec.before))
		return nil
	}
	line.Figures = append(line.Figures, fmt.Sprintf("throughput back %.1fs after the release (%.1f records/s before)", rec.back.Seconds(), rec.before))
	line.Details = append(line.Details, "finished every 100 ms after the release: "+rec.curve)
	if rec.back > time.Second {
		line.Problems = append(line.Problems, fmt.Sprintf("throughput back only %.1fs after the release; want within 1s", rec.back.Seconds()))
	}
	return nil
}
