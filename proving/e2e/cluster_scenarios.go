package e2e

import (
	"fmt"
	"time"
)

// ClusterScenarios are the faults of a replicated cluster (three nodes,
// replication factor 3, min.insync.replicas 2) and of the network between
// it and the listeners, each judged like every scenario (every host right,
// nothing lost, dead letters exact, committed = end, no committed offset
// ever going back) plus its own line. The stream is produced while the
// listeners run, so each fault meets a steady flow rather than a backlog.
func ClusterScenarios() []Scenario {
	base := func(name string, stream time.Duration, listeners int, faults ...Fault) Scenario {
		return Scenario{Name: name, Events: 8000, Hosts: 2000, Listeners: listeners, Cluster: true, NoDeadLetters: true,
			StreamFor: stream, Limit: 5 * time.Minute, Faults: faults, Judge: judgeNoUnplannedExit}
	}
	return []Scenario{
		base("leader-loss", 60*time.Second, 3, Fault{0.15, "kill -9 the coordinator, the node leading most partitions if it is not; start it after 20 s", leaderLoss}),
		base("rolling-restart", 90*time.Second, 3, Fault{0.05, "SIGTERM and start each node in turn, the next once nothing is under-replicated", rollingRestart}),
		base("partitioned", 60*time.Second, 2, Fault{0.15, "blackhole listener 1's link to the node leading most partitions for 30 s", partitioned(30 * time.Second)}),
		coordinatorCutScenario(base("coordinator-cut", 60*time.Second, 2)),
		withJudge(base("zombie", 60*time.Second, 3, Fault{0.2, "SIGSTOP the listener evaluating the zombie host's older event for at least 12 s (session timeout 3 s) while another applies its newer one, then SIGCONT", zombie(12 * time.Second)}), judgeZombie),
		base("slow-network", 100*time.Second, 2, Fault{0.05, "200 ± 100 ms and a 2 s slow close on every broker link for 60 s, then 256 KB/s for 20 s", slowNetwork}),
		base("db-link-resets", 60*time.Second, 2, Fault{0.2, "reset every PostgreSQL connection 100 ms into it, for 20 s", dbResets(20 * time.Second)}),
	}
}

// withJudge replaces sc's judge by judge, after judgeNoUnplannedExit.
func withJudge(sc Scenario, judge func(r *run, line *Line) error) Scenario {
	sc.Judge = func(r *run, line *Line) error {
		if err := judgeNoUnplannedExit(r, line); err != nil {
			return err
		}
		return judge(r, line)
	}
	return sc
}

// judgeNoUnplannedExit: every listener the scenario started and did not
// stop itself is still running when the suite stops them.
func judgeNoUnplannedExit(r *run, line *Line) error {
	for _, p := range r.listeners {
		if p.exitedOnItsOwn(r.stopping) {
			line.Problems = append(line.Problems, fmt.Sprintf("%s exited on its own: %v", p.name, p.err))
		}
	}
	return nil
}

// leaderLoss kill -9s the group's coordinator (or, should it lead none of
// the topic's partitions, the node leading most), restarts it after 20 s and
// waits for the cluster to be whole again.
func leaderLoss(r *run) error {
	leads, coordinator, err := r.leadership()
	if err != nil {
		return err
	}
	victim := coordinator
	if leads[victim] == 0 {
		for n, c := range leads {
			if c > leads[victim] {
				victim = n
			}
		}
	}
	r.note(fmt.Sprintf("killed node %d (coordinator: node %d; it led %d of 8 partitions)", victim, coordinator, leads[victim]))
	if err := r.node("node-kill", victim); err != nil {
		return err
	}
	r.wait(20 * time.Second)
	if err := r.node("node-start", victim); err != nil {
		return err
	}
	took, err := r.waitReplicated(2 * time.Minute)
	r.note(fmt.Sprintf("replicated again %.1fs after the restart", took.Seconds()))
	return err
}

// rollingRestart stops each node with SIGTERM and starts it again, the
// next only once no partition is under-replicated: the monthly routine.
func rollingRestart(r *run) error {
	start := time.Now()
	for n := int32(1); n <= 3; n++ {
		if err := r.node("node-stop", n); err != nil {
			return err
		}
		if err := r.node("node-start", n); err != nil {
			return err
		}
		if _, err := r.waitReplicated(2 * time.Minute); err != nil {
			return fmt.Errorf("after restarting node %d: %w", n, err)
		}
	}
	r.note(fmt.Sprintf("rolled three nodes in %.1fs", time.Since(start).Seconds()))
	return nil
}

// partitioned cuts listener 1 (slot 0) off from one node, the one leading
// most partitions, for d: its connections to that node stay open and carry
// nothing; every other link stays healthy.
func partitioned(d time.Duration) func(r *run) error {
	return func(r *run) error {
		leads, _, err := r.leadership()
		if err != nil {
			return err
		}
		victim := int32(1)
		for n, c := range leads {
			if c > leads[victim] {
				victim = n
			}
		}
		nf := r.env.Cluster.net
		if err := nf.blackhole(nf.brokers[0][victim-1]); err != nil {
			return err
		}
		r.note(fmt.Sprintf("listener 1 cut off from node %d (leading %d of 8) for %v", victim, leads[victim], d))
		r.wait(d)
		nf.heal()
		return nil
	}
}

// coordinatorCutScenario cuts listener 1 (slot 0) off from the group's
// coordinator alone for 20 s: its fetches from the other nodes go on. The
// group throws it out a session timeout (3 s) after the coordinator last
// heard from it, and its partitions' next owners start at the committed
// offsets, so whatever it runs after that is run twice. The session lease
// must hold its admission by then: judged on its own status, every
// partition it still shows admits at most one record (one taken in hand
// before the lapse, admitted after a wait for a credit or the span) from
// lapseBound into the cut to its end.
func coordinatorCutScenario(sc Scenario) Scenario {
	var cut struct {
		node                 int32
		compared, lateAdmits int
		err                  error
	}
	const length = 20 * time.Second
	sc.SampleStatus, sc.StatusPorts = true, true
	// lapseBound: the session timeout, a heartbeat interval for the
	// question that missed it, and a status look's age.
	const lapseBound = 3*time.Second + 500*time.Millisecond + lookInterval + 250*time.Millisecond
	sc.Faults = []Fault{{0.15, "blackhole listener 1's link to the group's coordinator (only) for 20 s", func(r *run) error {
		// A cooperative rebalance hands a joining member its partitions
		// in a second round: wait until listener 1 holds some, or the cut
		// has nothing to judge.
		for deadline := time.Now().Add(30 * time.Second); ; {
			if s, ok := r.listeners[0].sampleAtOrBefore(time.Now()); ok && len(s.st.Partitions) > 0 {
				break
			}
			if time.Now().After(deadline) {
				cut.err = errorf("listener 1 held no partition 30 s into the run: nothing to cut")
				return nil
			}
			r.wait(lookInterval)
		}
		_, coordinator, err := r.leadership()
		if err != nil {
			return err
		}
		cut.node = coordinator
		nf := r.env.Cluster.net
		if err := nf.blackhole(nf.brokers[0][coordinator-1]); err != nil {
			return err
		}
		start := time.Now()
		p := r.listeners[0]
		r.wait(lapseBound) // the status samples keep only the last 10 s
		from, ok1 := p.sampleAtOrBefore(time.Now())
		// A look the loaded machine slowed (its broker read, or the
		// status page) can leave the newest sample short of the lapse:
		// look on, for at most 2 s, until one is past it. The window
		// judged then starts that much later; the cut keeps its length.
		for deadline := time.Now().Add(2 * time.Second); (!ok1 || from.at.Sub(start) < lapseBound-lookInterval) && time.Now().Before(deadline); {
			r.wait(lookInterval)
			from, ok1 = p.sampleAtOrBefore(time.Now())
		}
		r.wait(length - time.Since(start))
		to, ok2 := p.sampleAtOrBefore(time.Now())
		nf.heal()
		if !ok1 || !ok2 || from.at.Sub(start) < lapseBound-lookInterval {
			cut.err = errorf("no status of listener 1 from %v into the cut and at its end", lapseBound)
			return nil
		}
		before := map[int32]int64{}
		for _, ps := range from.st.Partitions {
			before[ps.Partition] = ps.Admitted
		}
		for _, ps := range to.st.Partitions {
			if a, ok := before[ps.Partition]; ok {
				cut.compared++
				cut.lateAdmits += int(max(ps.Admitted-a-1, 0))
			}
		}
		r.note(fmt.Sprintf("listener 1 cut off from the coordinator (node %d) for %v: %d partitions held through it, %d records admitted past the lapse beyond one each", cut.node, length, cut.compared, cut.lateAdmits))
		return nil
	}}}
	return withJudge(sc, func(r *run, line *Line) error {
		switch {
		case cut.err != nil:
			line.Problems = append(line.Problems, cut.err.Error())
		case cut.compared == 0:
			line.Problems = append(line.Problems, "listener 1 held no partition through the cut: nothing to judge")
		case cut.lateAdmits > 0:
			line.Problems = append(line.Problems, fmt.Sprintf("listener 1 admitted %d records more than one per partition after its session lease lapsed", cut.lateAdmits))
		}
		return nil
	})
}

// slowNetwork slows every broker link, then limits its bandwidth.
func slowNetwork(r *run) error {
	nf := r.env.Cluster.net
	for _, p := range nf.allBrokers() {
		if err := nf.latency(p, 200, 100); err != nil {
			return err
		}
		if err := nf.slowClose(p, 2000); err != nil { // a closing connection lingers 2 s
			return err
		}
	}
	r.wait(60 * time.Second)
	nf.heal()
	for _, p := range nf.allBrokers() {
		if err := nf.bandwidth(p, 256); err != nil {
			return err
		}
	}
	r.wait(20 * time.Second)
	nf.heal()
	return nil
}

// dbResets resets every connection to PostgreSQL 100 ms after it first
// carries data, for d: transactions die mid-way, new ones too.
func dbResets(d time.Duration) func(r *run) error {
	return func(r *run) error {
		nf := r.env.Cluster.net
		if err := nf.resets(nf.database, 100); err != nil {
			return err
		}
		r.wait(d)
		nf.heal()
		return nil
	}
}

// note adds a figure to the run's line.
func (r *run) note(s string) { r.notes = append(r.notes, s) }
