package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/patchflow/patchflow/proving/platform"
)

// Scenarios returns the suite. Sizes fit the whole suite in a few minutes
// on a 2-core machine: profiles of 40 packages instead of 400 (the faults,
// not the payload, are what is tested here).
func Scenarios() []Scenario {
	// The crash loop measures and judges every kill: see crash.go.
	crash := Scenario{Name: "crash-loop", Events: 20000, Hosts: 4000, Listeners: 1, StatusPorts: true, SampleStatus: true, Judge: judgeCrashLoop}
	for i := 0; i < 10; i++ {
		// at random moments: one in each tenth of the first 85% of the run
		at := 0.085 * (float64(i) + rand.Float64())
		crash.Faults = append(crash.Faults, Fault{At: at, Name: fmt.Sprintf("kill -9 #%d and restart", i+1), Do: killAndRestart})
	}
	// No fault: what a run looks like when nothing goes wrong, for the
	// longest pin to be compared with the faults' (a record that waits for
	// its key's earlier record, or on the long tail of VMaaS, pins its
	// partition meanwhile). Nothing may be handled twice.
	clean := Scenario{Name: "clean", Events: 10000, Hosts: 2500, Listeners: 1, NoDeadLetters: true, Judge: judgeClean}
	start := func(r *run) error { return r.startListener() }
	kill := func(r *run) error { _, err := killRandom(r); return err }
	term := func(r *run) error {
		live := r.live()
		if len(live) == 0 {
			return errorf("no listener to stop")
		}
		return live[0].term(20 * time.Second)
	}
	churn := Scenario{Name: "group-churn", Events: 10000, Hosts: 2500, Listeners: 3, Faults: []Fault{
		{0.10, "SIGTERM a member", term}, {0.20, "start a member", start}, {0.30, "kill -9 a member", kill},
		{0.40, "start a member", start}, {0.50, "SIGTERM a member", term}, {0.60, "kill -9 a member", kill},
		{0.65, "start a member", start}, {0.70, "start a member", start},
	}}
	broker := Scenario{Name: "broker-restart", Events: 10000, Hosts: 2500, Listeners: 2, Faults: []Fault{
		{0.3, "stop the broker 5 s, start it again", func(r *run) error {
			if err := r.env.script("kafka", "stop", r.env.KafkaDir); err != nil {
				return err
			}
			time.Sleep(5 * time.Second) // nothing to look at: the broker is down, and a look would wait for it
			return r.env.script("kafka", "start", r.env.KafkaDir)
		}},
	}}
	// The adaptive limit (the default) must fall in both troubles and
	// rise again after them: judgeLimitThroughTrouble.
	db := Scenario{Name: "db-outage", Events: 10000, Hosts: 2500, Listeners: 2, NoDeadLetters: true, StatusPorts: true, WatchLimit: true,
		Judge: judgeLimitThroughTrouble, Faults: []Fault{
			{0.3, "stop PostgreSQL 15 s, start it again", func(r *run) error {
				if err := r.env.script("postgres", "pause", r.env.PGDir); err != nil {
					return err
				}
				r.markTrouble(true)
				r.wait(15 * time.Second)
				defer r.markTrouble(false)
				return r.env.script("postgres", "resume", r.env.PGDir)
			}},
		}}
	vmaas := Scenario{Name: "vmaas-trouble", Events: 10000, Hosts: 2500, Listeners: 2, NoDeadLetters: true, StatusPorts: true, WatchLimit: true,
		Judge: judgeLimitThroughTrouble, Faults: []Fault{
			{0.2, "VMaaS 503 for 10 s, then 2 s per call for 15 s, then well", func(r *run) error {
				if err := r.setFaults(platform.Faults{ErrorRate: 1, Latency: "fixed:5ms"}); err != nil {
					return err
				}
				r.markTrouble(true)
				r.wait(10 * time.Second)
				if err := r.setFaults(platform.Faults{Latency: "fixed:2s"}); err != nil {
					return err
				}
				r.wait(15 * time.Second)
				defer r.markTrouble(false)
				return r.setFaults(platform.Faults{Latency: "longtail:50ms"})
			}},
		}}
	poison := Scenario{Name: "poison", Events: 10000, Hosts: 2500, Listeners: 2, BadShare: 0.01, SkipShare: 0.01, StatusPort: true, Faults: []Fault{
		{0.3, "status page in a headless browser", func(r *run) error { return r.env.checkStatusPage(r.statusURL, r.env.Screenshot) }},
	}}
	sasl := Scenario{Name: "sasl-scram", Events: 3000, Hosts: 800, Listeners: 2, SASL: "SCRAM-SHA-512"}
	// Three hosts whose every VMaaS call hangs while the rest are served:
	// their records fail on their own and must be dead-lettered within the
	// own-failure bound, 3 × 3 s + 2 × 2 s = 13 s here (a VMaaS attempt gives
	// up after 1 s, an evaluation after 2 attempts, inside the 3 s attempt
	// deadline), instead of pinning their partitions. 32 records in flight
	// per process keep the wait for one of the 16 database connections well
	// inside that deadline, as LISTENER_ATTEMPT_TIMEOUT's documentation asks.
	// With the defaults (64 per partition, 256 per process here) a wait for a
	// connection that ends at the deadline is congestion, never counted, but
	// statements and VMaaS calls slowed by the queue still run past 3 s, and
	// a few healthy records were dead-lettered for it.
	hostage := Scenario{Name: "hostage", Events: 10000, Hosts: 2500, Listeners: 2, Hostages: 3, ListenerEnv: []string{
		kv("LISTENER_ATTEMPT_TIMEOUT", "3s"), kv("LISTENER_MAX_ATTEMPTS", "3"), kv("VMAAS_TIMEOUT", "1s"), kv("VMAAS_MAX_ATTEMPTS", "2"),
		kv("LISTENER_INFLIGHT_TOTAL", "32"),
	}}
	// A revoke while starved: see revoke.go.
	revoke := Scenario{Name: "revoke-starved", Events: 10000, Hosts: 2500, Listeners: 2, NoDeadLetters: true, StatusPorts: true,
		Judge: judgeRevokeStarved, Faults: []Fault{
			{0.2, "stop PostgreSQL 30 s; once both members are starved, a third joins", revokeWhileStarved(30 * time.Second)},
		}}
	return append([]Scenario{crash, clean, churn, broker, db, vmaas, poison, sasl, hostage, revoke, effectsRollbackScenario(), partitionsAddedScenario()}, append(append(lockedTableScenarios(), vmaasOutageScenario()), imageScenario())...)
}

// setFaults changes the mock's faults through its admin endpoint, as an
// operator would.
func (r *run) setFaults(f platform.Faults) error {
	body, _ := json.Marshal(f)
	resp, err := http.Post(r.mockURL+"/admin/faults", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorf("set faults: %s", resp.Status)
	}
	return nil
}

// judgeClean: without a fault nothing is evaluated twice and nothing is
// redelivered (a redelivered record would be skipped as already applied,
// and the stream has nothing else to skip).
func judgeClean(r *run, line *Line) error {
	if line.Duplicates != 0 {
		line.Problems = append(line.Problems, fmt.Sprintf("%d repeated evaluations without a fault", line.Duplicates))
	}
	if line.Skipped != 0 {
		line.Problems = append(line.Problems, fmt.Sprintf("%d records skipped (redelivered) without a fault", line.Skipped))
	}
	return nil
}
