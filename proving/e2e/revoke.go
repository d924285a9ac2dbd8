package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The revoke-starved scenario: PostgreSQL stops, so no record of the two
// members can finish and every partition's credits are held by records
// retrying a shared outage; a third member joins, and the cooperative
// rebalance revokes partitions from the starved members. A revoked claim
// must drain within the drain timeout (sarama would otherwise wait out
// Rebalance.Timeout and then tear down the member's whole session), the
// newcomer must get its partitions while the database is still down, and
// after the database returns nothing may be lost or dead-lettered.
const (
	// drainGrace is what the bridge allows past the drain timeout for the
	// partition actor's answer (actors.drainGrace).
	drainGrace = 2 * time.Second
	// rebalanceAllowance is what a cooperative rebalance may take besides
	// the revoked claims' drains: two rounds of joining and syncing, with
	// heartbeats every 500 ms.
	rebalanceAllowance = 10 * time.Second
	// starveWait bounds the wait for the members to be starved once the
	// database is down: the records in flight fail at once against a
	// stopped server, so a few seconds are plenty.
	starveWait = 20 * time.Second
)

// joinerEnv makes the third member a listener that needs no database: a
// listener with the evaluate handler connects to PostgreSQL and migrates
// its schema before it joins the group, and exits when it cannot, so none
// can start while the database is down. This one runs the same bridge,
// partition actors and consumer-group code with the simulated handler,
// whose records wait an hour (no attempt deadline): none finishes, so it
// marks nothing, and whatever it claimed is redelivered to the others once
// it stops. It is as starved as a real listener would be during the outage.
var joinerEnv = []string{kv("LISTENER_HANDLER", "simulated"), kv("LISTENER_SIMULATED_LATENCY", "1h"), kv("LISTENER_ATTEMPT_TIMEOUT", "0")}

// revokeWhileStarved stops PostgreSQL for pause; once the members are
// starved, a third member joins; when the database is back it stops again.
func revokeWhileStarved(pause time.Duration) func(r *run) error {
	return func(r *run) error {
		cfg, err := settingsOf(r.listenerEnv())
		if err != nil {
			return err
		}
		members := r.live()
		if err := r.env.script("postgres", "pause", r.env.PGDir); err != nil {
			return err
		}
		r.paused = time.Now()
		err = waitStarved(members, cfg.Pipeline.InFlightPerPartition, starveWait)
		if err != nil {
			r.problems = append(r.problems, err.Error()) // judged; the run goes on, and the database comes back
		}
		r.starved = time.Now()
		r.joiner, err = r.startListenerWith(joinerEnv...)
		if err == nil {
			r.wait(time.Until(r.paused.Add(pause))) // the outage's scripted length
		}
		if rerr := r.env.script("postgres", "resume", r.env.PGDir); rerr != nil {
			return rerr
		}
		r.resumed = time.Now()
		if err != nil {
			return err
		}
		return r.joiner.term(20 * time.Second)
	}
}

// listenerStatus is what the suite reads of a listener's /status.json
// (telemetry.Status).
type listenerStatus struct {
	Partitions []partitionStatus `json:"partitions"`
	// Concurrency is the process-wide limit (absent from listeners before
	// the adaptive limit: zero).
	Concurrency struct {
		Limit    int `json:"limit"`
		InFlight int `json:"in_flight"`
	} `json:"concurrency"`
	Totals totalsStatus `json:"totals"`
}

// partitionStatus is one partition of a listenerStatus.
type partitionStatus struct {
	Partition int32 `json:"partition"`
	Committed int64 `json:"committed"` // -1: none
	Admitted  int64 `json:"admitted"`  // the highest offset admitted; -1 before the first
	Lag       int64 `json:"lag"`
	InFlight  int   `json:"in_flight"`
	// CreditWait is how long the next record has waited for a credit; nil
	// when it does not wait (and in listeners before the status page showed
	// it).
	CreditWait *float64 `json:"credit_wait_seconds"`
}

// UnmarshalJSON reads an offset the listener shows none of (absent; -1 in
// listeners before the status page omitted it) as -1.
func (p *partitionStatus) UnmarshalJSON(b []byte) error {
	type plain partitionStatus
	v := plain{Committed: -1, Admitted: -1}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = partitionStatus(v)
	return nil
}

// totalsStatus is what the suite reads of a listener's totals.
type totalsStatus struct {
	Admitted      int64 `json:"admitted"`
	Succeeded     int64 `json:"succeeded"`
	Skipped       int64 `json:"skipped"`
	DeadLettered  int64 `json:"dead_lettered"`
	RetriedShared int64 `json:"retried_shared"`
	// Resumed: finished without running, as an earlier owner's commit
	// metadata said (absent from listeners before commit metadata).
	Resumed         int64            `json:"resumed"`
	SkippedByReason map[string]int64 `json:"skipped_by_reason"`
}

// UnmarshalJSON also reads the totals of listeners before /status.json's
// names were snake_case (E2E_BIN may name one): their names of more than
// one word were Go's (single words match either way, as encoding/json
// matches names regardless of case).
func (t *totalsStatus) UnmarshalJSON(b []byte) error {
	type plain totalsStatus
	var v plain
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	var old struct {
		DeadLettered, RetriedShared int64
		SkippedByReason             map[string]int64
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	v.DeadLettered = max(v.DeadLettered, old.DeadLettered)
	v.RetriedShared = max(v.RetriedShared, old.RetriedShared)
	if v.SkippedByReason == nil {
		v.SkippedByReason = old.SkippedByReason
	}
	*t = totalsStatus(v)
	return nil
}

// finished is what the listener finished by running it: succeeded,
// skipped or dead-lettered (not resumed).
func (st listenerStatus) finished() int64 {
	return st.Totals.Succeeded + st.Totals.Skipped + st.Totals.DeadLettered
}

// inFlight sums the partitions' records in flight.
func (st listenerStatus) inFlight() int {
	n := 0
	for _, p := range st.Partitions {
		n += p.InFlight
	}
	return n
}

// starveQuiet is how long a member must have finished nothing to count as
// starved.
const starveQuiet = 2 * time.Second

// waitStarved waits until each member is starved: it has finished no record
// for starveQuiet, its records have failed and been retried as a shared
// outage since the wait began, and it can admit nothing more
// (listenerStatus.admitsNothing).
func waitStarved(members []*listenerProc, perPartition int, limit time.Duration) error {
	type seen struct {
		finished, retried int64
		since             time.Time // when finished last changed
		state             string
	}
	began := time.Now()
	deadline := began.Add(limit)
	watch := map[*listenerProc]*seen{}
	for {
		starved := 0
		for _, p := range members {
			st, err := readStatus(p.status)
			w := watch[p]
			if err != nil {
				if w != nil {
					w.state = err.Error()
				}
				continue
			}
			finished := st.Totals.Succeeded + st.Totals.Skipped + st.Totals.DeadLettered
			if w == nil {
				w = &seen{finished: finished, retried: st.Totals.RetriedShared, since: time.Now()}
				watch[p] = w
			}
			if finished != w.finished {
				w.finished, w.since = finished, time.Now()
			}
			quiet := time.Since(w.since)
			w.state = fmt.Sprintf("nothing finished for %.1fs, %d shared-outage retries, limit %d with %d in flight, partitions %s",
				quiet.Seconds(), st.Totals.RetriedShared-w.retried, st.Concurrency.Limit, st.Concurrency.InFlight, st.partitionsLine())
			if quiet >= starveQuiet && st.Totals.RetriedShared > w.retried && st.admitsNothing(perPartition) {
				starved++
			}
		}
		if starved == len(members) {
			return nil
		}
		if time.Now().After(deadline) {
			states := []string{}
			for _, p := range members {
				if w := watch[p]; w != nil {
					states = append(states, p.name+": "+w.state)
				}
			}
			return fmt.Errorf("the members were not starved %v into the outage: %s", limit, strings.Join(states, "; "))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// admitsNothing reports a listener starved of credits: every partition it
// claims has records left and holds all it may of them (S, or all it has
// left), or the process holds its whole concurrency limit (the adaptive
// limit falls in an outage) and every partition it claims has records left
// and holds some of them or waits, its next record in hand, for a credit.
// A partition claimed once the limit was already held has admitted nothing
// and waits. A partition showing no lag is never starved: its lag is 0
// also before its high watermark is known.
func (st listenerStatus) admitsNothing(perPartition int) bool {
	if len(st.Partitions) == 0 {
		return false
	}
	full := true
	atLimit := st.Concurrency.Limit > 0 && st.Concurrency.InFlight >= st.Concurrency.Limit
	for _, ps := range st.Partitions {
		full = full && ps.Lag > 0 && int64(ps.InFlight) >= min(int64(perPartition), ps.Lag)
		atLimit = atLimit && ps.Lag > 0 && (ps.InFlight > 0 || ps.CreditWait != nil)
	}
	return full || atLimit
}

// partitionsLine is the partitions' state, for a problem's text.
func (st listenerStatus) partitionsLine() string {
	var parts []string
	for _, p := range st.Partitions {
		wait := ""
		if p.CreditWait != nil {
			wait = fmt.Sprintf(" waiting %.1fs for a credit", *p.CreditWait)
		}
		parts = append(parts, fmt.Sprintf("{%d: committed %d admitted %d lag %d in flight %d%s}", p.Partition, p.Committed, p.Admitted, p.Lag, p.InFlight, wait))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func readStatus(url string) (listenerStatus, error) {
	var st listenerStatus
	if url == "" {
		return st, errorf("no known status address")
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// judgeRevokeStarved reads the listeners' logs: every revoked claim of the
// two starved members drained within the drain timeout plus the bridge's
// grace, at least one of them while the database was down; the newcomer
// claimed partitions within that plus a rebalance's allowance of starting,
// before the database came back; and no member's session was torn down
// before the suite stopped them (no Cleanup, no Rebalance.Timeout error, no
// failed session).
func judgeRevokeStarved(r *run, line *Line) error {
	if r.joiner == nil || len(r.listeners) < 3 {
		line.Problems = append(line.Problems, "the third member never started")
		return nil
	}
	cfg, err := settingsOf(r.listenerEnv())
	if err != nil {
		return err
	}
	drainLimit := cfg.Pipeline.DrainTimeout + drainGrace
	joinLimit := drainLimit + rebalanceAllowance
	problem := func(format string, args ...any) { line.Problems = append(line.Problems, fmt.Sprintf(format, args...)) }

	var longest time.Duration
	revoked, revokedInOutage := 0, 0
	for _, p := range r.listeners {
		entries, err := p.logEntries()
		if err != nil {
			return err
		}
		member := p != r.joiner
		for _, e := range entries {
			switch {
			case e.Msg == "consumer group error" && strings.Contains(e.Error, "Rebalance.Timeout"):
				problem("%s at %s: %s", p.name, e.Time.Format("15:04:05.000"), e.Error)
			case e.Msg == "consumer group session failed; rejoining":
				problem("%s at %s: session failed: %s", p.name, e.Time.Format("15:04:05.000"), e.Error)
			case !member:
			case e.Msg == "left consumer group session" && e.Time.Before(r.stopping):
				problem("%s left its consumer group session at %s, before the run's end: its whole session was torn down", p.name, e.Time.Format("15:04:05.000"))
			case e.Msg == "claim ended" && e.Reason == "revoked":
				revoked++
				drain := time.Duration(e.Drain)
				longest = max(longest, drain)
				if drain > drainLimit {
					problem("%s: a revoked claim of partition %v took %v to drain, more than %v", p.name, deref(e.Partition), drain, drainLimit)
				}
				if !e.Time.Before(r.joiner.started) && e.Time.Before(r.resumed) {
					revokedInOutage++
				}
			}
		}
	}
	if revokedInOutage == 0 {
		problem("no claim of the starved members was revoked while the database was down")
	}

	entries, err := r.joiner.logEntries()
	if err != nil {
		return err
	}
	var first time.Time
	claims := 0
	for _, e := range entries {
		if e.Msg == "claim started" {
			if first.IsZero() {
				first = e.Time
			}
			claims++
		}
	}
	joined := first.Sub(r.joiner.started)
	switch {
	case first.IsZero():
		problem("the third member claimed no partition")
	case joined > joinLimit:
		problem("the third member's first claim came %.1fs after it started, more than %v", joined.Seconds(), joinLimit)
	case !first.Before(r.resumed):
		problem("the third member's first claim came after the database was back")
	}
	firstClaim := "none"
	if !first.IsZero() {
		firstClaim = fmt.Sprintf("%.1fs after its start, %.1fs into the outage", joined.Seconds(), first.Sub(r.paused).Seconds())
	}
	line.Figures = append(line.Figures, fmt.Sprintf("starved %.1fs into a %.0fs outage; revoked claims %d (%d during the outage), longest revoked drain %.1fs (allowed %v); third member's first claim %s (allowed %v), %d claims",
		r.starved.Sub(r.paused).Seconds(), r.resumed.Sub(r.paused).Seconds(), revoked, revokedInOutage, longest.Seconds(), drainLimit,
		firstClaim, joinLimit, claims))
	return nil
}

func deref(p *int32) any {
	if p == nil {
		return "?"
	}
	return *p
}
