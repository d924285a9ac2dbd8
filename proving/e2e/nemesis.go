package e2e

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// The nemesis: a seeded random schedule of the cluster's faults, the
// listeners' (kill -9, SIGTERM, SIGSTOP) and VMaaS trouble, one after
// another with healthy gaps between, for a set duration, against three
// listeners and a producer at a steady rate the whole time. Then everything
// is healed, the run waits for committed = end, and every scenario's check
// runs; judgeNemesis adds the figures per fault (nemesis_judge.go).
//
// The schedule is a pure function of (seed, duration): the same seed gives
// the same faults, targets and lengths, printed before the run, so a
// failing seed is a reproducible one. The run's timing (what is in flight
// when a fault hits) is not: it varies with the machine.

// nemesisKind is one kind of fault the nemesis draws.
type nemesisKind string

const (
	nemesisNodeKill     nemesisKind = "node kill -9"     // a broker, started again after the fault's length
	nemesisNodeTerm     nemesisKind = "node restart"     // a broker stopped (SIGTERM) and started again
	nemesisPartition    nemesisKind = "partition"        // one listener cut off from one broker (blackhole)
	nemesisSlow         nemesisKind = "slow network"     // 200 ± 100 ms on every broker link
	nemesisBandwidth    nemesisKind = "bandwidth"        // 256 KB/s on every broker link
	nemesisDBResets     nemesisKind = "db resets"        // every PostgreSQL connection reset 100 ms in
	nemesisListenerKill nemesisKind = "listener kill -9" // a listener killed, a new one started at once
	nemesisListenerTerm nemesisKind = "listener SIGTERM" // a listener drained and ended, a new one started
	nemesisZombie       nemesisKind = "listener SIGSTOP" // a listener stopped past its session timeout
	nemesisVMaaS        nemesisKind = "vmaas trouble"    // half of VMaaS calls answered 503, slowly
	nemesisLockedTable  nemesisKind = "locked table"     // the system table locked ACCESS EXCLUSIVE, as a migration does
)

// nemesisKinds are the kinds drawn, each as likely.
var nemesisKinds = []nemesisKind{nemesisNodeKill, nemesisNodeTerm, nemesisPartition, nemesisSlow, nemesisBandwidth,
	nemesisDBResets, nemesisListenerKill, nemesisListenerTerm, nemesisZombie, nemesisVMaaS, nemesisLockedTable}

// nemesisStep is one fault of the schedule.
type nemesisStep struct {
	At     time.Duration // from the start of the schedule
	Kind   nemesisKind
	Length time.Duration // how long the fault lasts (0: an instant one)
	// Node is the broker (1-3) a node or partition fault hits; Listener
	// picks the listener a listener or partition fault hits among those
	// it may hit (modulo their number at the time).
	Node     int32
	Listener int
}

// Target says what the step hits, as the timeline prints it.
func (s nemesisStep) Target() string {
	switch s.Kind {
	case nemesisNodeKill, nemesisNodeTerm:
		return fmt.Sprintf("node %d", s.Node)
	case nemesisPartition:
		return fmt.Sprintf("listener #%d from node %d", s.Listener, s.Node)
	case nemesisListenerKill, nemesisListenerTerm, nemesisZombie:
		return fmt.Sprintf("listener #%d", s.Listener)
	case nemesisDBResets:
		return "PostgreSQL links"
	case nemesisVMaaS:
		return "VMaaS"
	}
	return "all broker links"
}

// nemesisGap bounds the healthy time between two faults: long enough for
// the group to settle, so each fault's duplicates and stall are its own.
const nemesisGapMin, nemesisGapMax = 10 * time.Second, 20 * time.Second

// nemesisLengthMin and nemesisLengthMax bound a lasting fault's length.
// The shortest stop of a listener still passes its session timeout (3 s
// in the suite) twice over.
const nemesisLengthMin, nemesisLengthMax = 6 * time.Second, 25 * time.Second

// nemesisSchedule draws the faults of a run of length d from seed. Every
// step ends (length, plus a node's catching up, which the schedule
// budgets at 30 s) before d.
func nemesisSchedule(seed uint64, d time.Duration) []nemesisStep {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	var steps []nemesisStep
	at := between(nemesisGapMin, nemesisGapMax)
	for {
		s := nemesisStep{At: at, Kind: nemesisKinds[rng.IntN(len(nemesisKinds))], Node: int32(1 + rng.IntN(3)), Listener: rng.IntN(3)}
		var budget time.Duration
		switch s.Kind {
		case nemesisListenerKill, nemesisListenerTerm:
			s.Length = 0
		case nemesisNodeTerm:
			budget = 30 * time.Second
		case nemesisNodeKill:
			s.Length = between(nemesisLengthMin, nemesisLengthMax)
			budget = 30 * time.Second
		default:
			s.Length = between(nemesisLengthMin, nemesisLengthMax)
		}
		if at+s.Length+budget > d {
			return steps
		}
		steps = append(steps, s)
		at += s.Length + budget + between(nemesisGapMin, nemesisGapMax)
	}
}

// NemesisScenario is the nemesis for d with seed: three listeners, a
// stream at nemesisRate events per second for d.
func NemesisScenario(seed uint64, d time.Duration) Scenario {
	events := int(nemesisRate * d.Seconds())
	return Scenario{Name: "nemesis", Events: events, Hosts: max(events/4, 200), Listeners: 3, Cluster: true, NoDeadLetters: true,
		StreamFor: d, Limit: d + 6*time.Minute, StatusPorts: true, SampleStatus: true,
		Faults: []Fault{{0, fmt.Sprintf("the nemesis, seed %d, for %v", seed, d), nemesis(seed, d)}},
		Judge:  judgeNemesis}
}

// nemesisRate is the stream's rate: about half of what three listeners
// sustain on the cluster on a 2-core machine, so a fault's backlog drains
// within the gap after it.
const nemesisRate = 60.0
