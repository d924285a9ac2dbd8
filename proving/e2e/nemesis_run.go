package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/patchflow/patchflow/proving/platform"
)

// nemesisRun is what the nemesis did, for judgeNemesis.
type nemesisRun struct {
	seed     uint64
	duration time.Duration
	began    time.Time
	steps    []nemesisOutcome
	// steady is the listener no fault of its own ends (the first): its
	// memory and goroutines are sampled over the whole run.
	steady *listenerProc
	mem    []memSample
	// window is the outcome whose window is open (from its start to the
	// next one's), for the in-flight figure; nil before the first.
	window *nemesisOutcome
}

// nemesisOutcome is one step as it ran.
type nemesisOutcome struct {
	step   nemesisStep
	target string // what it hit, resolved at run time
	start  time.Time
	healed time.Time
	// inFlight is the most records the live listeners held admitted above
	// their committed offsets at any look of the fault's window (from its
	// start to the next fault's): what a crash or a revoke then could
	// have handed to another owner, the bound of its repeats.
	inFlight int
	err      string
}

// memSample is the steady listener's resident memory and goroutines, and
// the partitions it held then.
type memSample struct {
	at         time.Time
	rss        int64 // bytes
	goroutines int
	claims     int
	// inFlight is the records admitted and not finished: each may hold a
	// goroutine (its handler's call, its dependency's connection).
	inFlight int
}

// memEvery is how often the steady listener's memory is sampled.
const memEvery = 10 * time.Second

func nemesis(seed uint64, d time.Duration) func(r *run) error {
	return func(r *run) error {
		steps := nemesisSchedule(seed, d)
		n := &nemesisRun{seed: seed, duration: d, began: time.Now()}
		if len(r.listeners) > 0 {
			n.steady = r.listeners[0]
		}
		r.nemesis = n
		fmt.Printf("nemesis seed %d, %v, %d faults (NEMESIS_SEED=%d NEMESIS_DURATION=%v reproduces the schedule):\n", seed, d, len(steps), seed, d)
		for i, s := range steps {
			fmt.Printf("  %2d  at %7.1fs  %-17s %-26s for %5.1fs\n", i+1, s.At.Seconds(), s.Kind, s.Target(), s.Length.Seconds())
		}
		for _, s := range steps {
			n.until(r, n.began.Add(s.At))
			n.steps = append(n.steps, nemesisOutcome{step: s, start: time.Now()})
			o := &n.steps[len(n.steps)-1]
			n.window = o
			n.track(r)
			if err := n.do(r, o); err != nil {
				o.err = err.Error()
				r.env.Cluster.net.heal()
				_ = r.setFaults(platform.Faults{Latency: "longtail:50ms"})
			}
			if o.healed.IsZero() {
				o.healed = time.Now()
			}
		}
		n.until(r, n.began.Add(d))
		return nil
	}
}

// until looks at the run until t, tracking the window's in-flight figure
// and sampling the steady listener's memory.
func (n *nemesisRun) until(r *run, t time.Time) {
	for time.Now().Before(t) {
		r.wait(min(time.Until(t), lookInterval))
		n.track(r)
	}
}

// hold is a fault's length: until, from now.
func (n *nemesisRun) hold(r *run, d time.Duration) { n.until(r, time.Now().Add(d)) }

// track records the in-flight figure of the open window and, every
// memEvery, the steady listener's memory.
func (n *nemesisRun) track(r *run) {
	if n.window != nil {
		// At risk: admitted above the offsets the group has committed, as
		// the broker last told the watch (not the listeners' marks: a member
		// cut off from its coordinator marks what it can never commit, and
		// the partition's next owner runs it again), plus finished within
		// the last atRiskWindow (perhaps not committed yet).
		var committed map[int32]int64
		if h := r.watch.history; len(h) > 0 {
			committed = h[len(h)-1].committed
		}
		var parts [][]partitionStatus
		held, now := 0, time.Now()
		for _, p := range r.live() {
			s, ok := p.sampleAtOrBefore(now)
			if !ok {
				continue
			}
			parts = append(parts, s.st.Partitions)
			if earlier, ok := p.sampleAtOrBefore(now.Add(-atRiskWindow)); ok {
				finished := func(t totalsStatus) int64 { return t.Succeeded + t.Skipped + t.DeadLettered }
				held += int(max(finished(s.st.Totals)-finished(earlier.st.Totals), 0))
			}
		}
		held += admittedAboveCommitted(committed, parts)
		n.window.inFlight = max(n.window.inFlight, held)
	}
	if p := n.steady; p != nil && p.running() && (len(n.mem) == 0 || time.Since(n.mem[len(n.mem)-1].at) >= memEvery) {
		if m, err := sampleMemory(p); err == nil {
			n.mem = append(n.mem, m)
		}
	}
}

// admittedAboveCommitted counts, per partition, the offsets from the
// group's committed one (as the broker has it) up to the highest any
// listener admitted: what the partition's next owner may run again.
func admittedAboveCommitted(committed map[int32]int64, listeners [][]partitionStatus) int {
	admitted := map[int32]int64{}
	for _, parts := range listeners {
		for _, ps := range parts {
			if a, seen := admitted[ps.Partition]; ps.Admitted >= 0 && (!seen || ps.Admitted > a) {
				admitted[ps.Partition] = ps.Admitted
			}
		}
	}
	n := 0
	for part, a := range admitted {
		n += int(max(a+1-max(committed[part], 0), 0))
	}
	return n
}

// do runs one step: the fault, its length, and its healing.
func (n *nemesisRun) do(r *run, o *nemesisOutcome) error {
	s, nf := o.step, r.env.Cluster.net
	o.target = s.Target()
	switch s.Kind {
	case nemesisNodeKill, nemesisNodeTerm:
		command := "node-kill"
		if s.Kind == nemesisNodeTerm {
			command = "node-stop"
		}
		if err := r.node(command, s.Node); err != nil {
			return err
		}
		n.hold(r, s.Length)
		if err := r.node("node-start", s.Node); err != nil {
			return err
		}
		o.healed = time.Now()
		took, err := r.waitReplicated(2 * time.Minute)
		o.target += fmt.Sprintf(", in sync %.0fs after its start", took.Seconds())
		return err
	case nemesisPartition:
		p := n.victim(r, s.Listener, true)
		if p == nil {
			return errorf("no listener to cut off")
		}
		o.target = fmt.Sprintf("%s from node %d", short(r, p), s.Node)
		if err := nf.blackhole(nf.brokers[p.slot][s.Node-1]); err != nil {
			return err
		}
		n.hold(r, s.Length)
		nf.heal()
	case nemesisSlow, nemesisBandwidth:
		for _, p := range nf.allBrokers() {
			var err error
			if s.Kind == nemesisSlow {
				err = nf.latency(p, 200, 100)
			} else {
				err = nf.bandwidth(p, 256)
			}
			if err != nil {
				return err
			}
		}
		n.hold(r, s.Length)
		nf.heal()
	case nemesisDBResets:
		if err := nf.resets(nf.database, 100); err != nil {
			return err
		}
		n.hold(r, s.Length)
		nf.heal()
	case nemesisVMaaS:
		if err := r.setFaults(platform.Faults{ErrorRate: 0.5, Latency: "longtail:200ms"}); err != nil {
			return err
		}
		n.hold(r, s.Length)
		if err := r.setFaults(platform.Faults{Latency: "longtail:50ms"}); err != nil {
			return err
		}
	case nemesisLockedTable:
		release, err := r.lockTable()
		if err != nil {
			return err
		}
		n.hold(r, s.Length)
		if err := release(); err != nil {
			return err
		}
	case nemesisListenerKill, nemesisListenerTerm:
		p := n.victim(r, s.Listener, false)
		if p == nil {
			return errorf("no listener to end")
		}
		o.target = short(r, p)
		if s.Kind == nemesisListenerKill {
			p.kill9()
		} else if err := p.term(30 * time.Second); err != nil {
			return err
		}
		if err := r.startListener(); err != nil {
			return err
		}
		o.target += ", then " + short(r, r.listeners[len(r.listeners)-1]) + " started"
	case nemesisZombie:
		p := n.victim(r, s.Listener, false)
		if p == nil {
			return errorf("no listener to stop")
		}
		o.target = short(r, p)
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		n.hold(r, s.Length)
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			return err
		}
	default:
		return errorf("unknown fault %q", s.Kind)
	}
	return nil
}

// victim picks the listener a fault hits: choice modulo the live ones it
// may hit (any, for a partition; not the steady one, for a fault that ends
// or stops a process).
func (n *nemesisRun) victim(r *run, choice int, steadyToo bool) *listenerProc {
	var may []*listenerProc
	for _, p := range r.live() {
		if steadyToo || p != n.steady {
			may = append(may, p)
		}
	}
	if len(may) == 0 {
		return nil
	}
	return may[choice%len(may)]
}

// short is a listener's name without the scenario's.
func short(r *run, p *listenerProc) string { return strings.TrimPrefix(p.name, r.sc.Name+"-") }

// sampleMemory reads p's resident set size from /proc, and its goroutines
// and claims (a partition's in-flight gauge each) from its /metrics.
func sampleMemory(p *listenerProc) (memSample, error) {
	m := memSample{at: time.Now()}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return m, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return m, err
			}
			m.rss = kb << 10
		}
	}
	if p.status == "" {
		return m, errorf("no status address")
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(strings.TrimSuffix(p.status, "/status.json") + "/metrics")
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	sc = bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			g, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				return m, err
			}
			m.goroutines = int(g)
		}
		if rest, ok := strings.CutPrefix(sc.Text(), "patchflow_partition_in_flight_records{"); ok {
			m.claims++
			if _, v, ok := strings.Cut(rest, "} "); ok {
				if n, err := strconv.ParseFloat(v, 64); err == nil {
					m.inFlight += int(n)
				}
			}
		}
	}
	if m.rss == 0 || m.goroutines == 0 {
		return m, errorf("no VmRSS or go_goroutines for %s", p.name)
	}
	return m, sc.Err()
}
