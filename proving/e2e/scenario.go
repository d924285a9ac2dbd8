package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/proving/checker"
	"github.com/patchflow/patchflow/proving/effects"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/offsets"
	"github.com/patchflow/patchflow/proving/platform"
)

// Scenario is one fault-injection run.
type Scenario struct {
	Name      string
	Events    int
	Hosts     int
	BadShare  float64 // broken messages: dead-lettered, each with its reason
	SkipShare float64 // messages the listener skips: committed and counted, never dead-lettered
	Listeners int
	// Partitions is the topic's partition count (default 8).
	Partitions int32
	// MockLatency is the platform mock's VMaaS latency (default
	// "longtail:50ms").
	MockLatency string
	// Faults run once progress (committed records / all records) reaches At.
	Faults []Fault
	// NoDeadLetters asserts nothing was dead-lettered (the faults are transient).
	NoDeadLetters bool
	// SASL runs the listeners through the broker's SASL listener with this
	// mechanism, after checking a wrong password is refused.
	SASL string
	// StatusPort gives the first listener a known HTTP port, for the
	// browser check of its status page.
	StatusPort bool
	// StatusPorts gives every listener a known HTTP port: the scenario
	// reads their /status.json.
	StatusPorts bool
	// SampleStatus reads every live listener's /status.json each time the
	// run looks at the broker (every 250 ms), keeping the last
	// sampleHistory of samples (listenerProc.samples); needs StatusPorts.
	SampleStatus bool
	// WatchLimit records every live listener's concurrency limit from its
	// /status.json each time the run looks (listenerProc.limits, the whole
	// run); needs StatusPorts.
	WatchLimit bool
	// ListenerEnv is added to every listener's environment after the
	// suite's own settings (a later value wins).
	ListenerEnv []string
	// Hostages is how many hosts the mock holds hostage for the whole run:
	// every VMaaS call for their profiles hangs until the client gives up
	// (platform.Faults.HangHosts; chooseHostages says which hosts). Their
	// created and updated events must be dead-lettered as failures of their
	// own, every other host must be right, the hostages stored and never
	// evaluated, and no partition's committed offset may stay pinned
	// longer than the listeners' own-failure bound plus pinSlack.
	Hostages int
	// Cluster runs the scenario on the three-node cluster, every listener
	// link through a fault proxy (Env.Cluster).
	Cluster bool
	// StreamFor produces the stream evenly over this long while the
	// listeners run, instead of before they start.
	StreamFor time.Duration
	// Limit is how long the run may take to commit everything (default 6
	// minutes).
	Limit time.Duration
	// Container runs every listener from Env.Image, through the container
	// engine (container.go).
	Container bool
	// Judge, when set, adds the scenario's own checks once the listeners
	// have stopped, appending to line.Problems and line.Figures.
	Judge func(r *run, line *Line) error
}

// Fault is an action at a point of progress.
type Fault struct {
	At   float64
	Name string
	Do   func(r *run) error
}

// Line is the outcome of a scenario, one line of the report.
type Line struct {
	Scenario       string
	Events         int
	Lost           int // records whose effect is missing, or not committed
	Wrong          int
	DeadLettered   int
	ExpectedDead   int
	DeadByReasonOK bool
	// Skipped is what the listeners counted, from the totals each logs as
	// it stops; -1 when one did not stop cleanly (killed), so the count is
	// unknown. ExpectedSkip is what the plan sent to be skipped.
	Skipped      int64
	ExpectedSkip int
	Duplicates   int64
	Finish       time.Duration
	LongestStall time.Duration
	// LongestPin is the longest any one partition's committed offset stayed
	// the same while below its end offset, as the run loop saw it: that of
	// partition PinPartition, from PinFrom after the listeners started.
	LongestPin   time.Duration
	PinPartition int32
	PinFrom      time.Duration
	OffsetsAtEnd bool
	// Figures are the scenario's own measurements.
	Figures []string
	// Details are lines printed under the scenario's line (a table).
	Details  []string
	Faults   []string
	Problems []string
}

// OK reports whether the scenario met its acceptance criteria.
func (l Line) OK() bool { return len(l.Problems) == 0 }

func (l Line) String() string {
	status := "PASS"
	if !l.OK() {
		status = "FAIL: " + strings.Join(l.Problems, "; ")
	}
	skipped := "?"
	if l.Skipped >= 0 {
		skipped = fmt.Sprint(l.Skipped)
	}
	figures := ""
	for _, f := range l.Figures {
		figures += "  " + f
	}
	details := ""
	for _, d := range l.Details {
		details += "\n    " + d
	}
	return fmt.Sprintf("%-14s events %6d  faults %2d  lost %d  wrong rows %d  dead-lettered %d/%d expected  skipped %s/%d expected  repeated evaluations %d  finish %6.1fs  longest stall %5.1fs  longest pin %5.1fs (partition %d from %.1fs)  offsets at end %v%s  %s%s",
		l.Scenario, l.Events, len(l.Faults), l.Lost, l.Wrong, l.DeadLettered, l.ExpectedDead, skipped, l.ExpectedSkip, l.Duplicates, l.Finish.Seconds(), l.LongestStall.Seconds(), l.LongestPin.Seconds(), l.PinPartition, l.PinFrom.Seconds(), l.OffsetsAtEnd, figures, status, details)
}

// run is the state of one scenario in progress.
type run struct {
	env     *Env
	sc      Scenario
	topic   string
	group   string
	dbURL   string
	mock    *platform.Server
	mockURL string
	// What the listeners are given for the database and the mock: dbURL
	// and mockURL, or, on the cluster, the fault proxies in front of them.
	listenerDB, listenerMock string
	plan                     *loadgen.Plan
	opts                     loadgen.Options
	ds                       *platform.Dataset
	hostages                 []string
	began                    time.Time // when the listeners started
	listeners                []*listenerProc
	started                  int
	faults                   []string
	statusURL                string // the first listener's /status, when StatusPort
	problems                 []string
	// stopping is when the suite began stopping the listeners at the end.
	stopping time.Time
	// What the revoke-starved fault did, for its judge.
	paused, starved, resumed time.Time
	joiner                   *listenerProc
	// When the db-outage and vmaas-trouble scenarios' trouble began and
	// ended, for judgeLimitThroughTrouble.
	troubleFrom, troubleTo time.Time
	// What the crash loop's kills saw, for its judge.
	kills []killRecord
	// When the partitions-added fault grew the topic, for its judge.
	partitionsAdded time.Time
	// notes are the faults' own figures, for the line.
	notes []string
	// What the zombie fault did, for its judge.
	zombie *zombieRecord
	// What the locked-table fault measured, for its judge, and the curve
	// it is drawing.
	recovery *recoveryRecord
	curve    []string
	// What the nemesis did, for its judge.
	nemesis *nemesisRun
	// watch is what the run has seen of the group's progress.
	watch *watch
}

// lookInterval is how often the run looks at the group's progress.
const lookInterval = 250 * time.Millisecond

// watch is what the run learns each time it looks at the broker: the
// group's progress, the longest stall and the longest pin, into line.
// Faults that wait keep looking (run.wait), so a stall or a pin during a
// fault is seen while it lasts, not only once the fault is over.
type watch struct {
	line          *Line
	lastProgress  time.Time // when done last grew
	lastCommitted int64     // done when last seen grow; -1 before the first look
	total, done   int64     // records on the topic, below the committed offsets
	// Per partition: its committed offset when last seen, and since when.
	pinnedAt    map[int32]int64
	pinnedSince map[int32]time.Time
	// firstCommit is when each partition was first seen with a committed
	// offset above 0.
	firstCommit map[int32]time.Time
	// history is every look's progress per partition (progressPoint), for
	// the nemesis's stall after each fault.
	history []progressPoint
	// offsets logs each change of a committed offset, when, and the
	// coordinator that answered (<scenario>-offsets.log); nil when it could
	// not be made.
	offsets *os.File
	// looked is set once a look has read the group's progress.
	looked bool
}

// due reports whether a fault at fraction at of the topic's records is due,
// done of total committed. Never before the topic holds a record: a look
// before the producer's first would find 0 of 0 done and fire the fault
// as the listeners start (and migrate), not at that fraction of the work.
func due(at float64, done, total int64) bool {
	return total > 0 && float64(done) >= at*float64(total)
}

// look reads the group's progress once (and the listeners' status, when
// the scenario samples it); false when the broker did not answer.
func (r *run) look() bool {
	w, line := r.watch, r.watch.line
	if r.sc.SampleStatus {
		r.sampleStatus()
	}
	if r.sc.WatchLimit {
		r.watchLimits()
	}
	progress, err := offsets.Read(r.env.Brokers, r.topic, r.group)
	if err != nil {
		return false
	}
	w.total, w.done = progress.Total(), progress.Done()
	now := time.Now()
	if r.nemesis != nil {
		w.record(now, progress.Committed, progress.Ends)
	}
	if w.done > w.lastCommitted {
		if w.lastCommitted >= 0 {
			line.LongestStall = max(line.LongestStall, now.Sub(w.lastProgress))
		}
		w.lastProgress, w.lastCommitted = now, w.done
	}
	for part, end := range progress.Ends {
		committed := min(progress.Committed[part], end)
		if at, seen := w.pinnedAt[part]; seen && at >= 0 && committed < at {
			// Only a member fenced out of its generation could move it
			// back (a zombie's commit the coordinator accepted).
			r.problems = appendOnce(r.problems, fmt.Sprintf("partition %d's committed offset went back from %d to %d at %.1f s (coordinator %d; %s-offsets.log)",
				part, at, committed, now.Sub(r.began).Seconds(), progress.Coordinator, r.sc.Name))
		}
		if _, seen := w.firstCommit[part]; !seen && committed > 0 {
			w.firstCommit[part] = now
		}
		if at, seen := w.pinnedAt[part]; !seen || committed != at {
			if w.offsets != nil {
				fmt.Fprintf(w.offsets, "%9.3f s  partition %d  %d -> %d  coordinator %d\n", now.Sub(r.began).Seconds(), part, w.pinnedAt[part], committed, progress.Coordinator)
			}
			w.pinnedAt[part], w.pinnedSince[part] = committed, now
			if !seen && !w.looked {
				w.pinnedSince[part] = r.began // nothing was committed before the listeners started
			} // a partition first seen later was added to the topic then
		}
		if pin := now.Sub(w.pinnedSince[part]); committed < end && pin > line.LongestPin {
			line.LongestPin, line.PinPartition, line.PinFrom = pin, part, w.pinnedSince[part].Sub(r.began)
		}
	}
	w.looked = true
	return true
}

// wait lets d pass, as a fault's scripted length, looking at the group's
// progress every lookInterval meanwhile (a look takes a few milliseconds
// while the broker is up; not for a fault that stops it).
func (r *run) wait(d time.Duration) {
	end := time.Now().Add(d)
	for left := time.Until(end); left > 0; left = time.Until(end) {
		time.Sleep(min(left, lookInterval))
		r.look()
	}
}

var shape = platform.ProfileShape{Packages: 40, Repos: 10}

// listenerEnv is the configuration every listener process of the run gets.
func (r *run) listenerEnv() []string {
	return r.listenerEnvSlot(0)
}

// listenerEnvSlot is listenerEnv for the listener in fault-proxy slot k
// (on the cluster: its own proxies to the brokers).
func (r *run) listenerEnvSlot(k int) []string {
	brokers := []string{kv("KAFKA_BROKERS", join(r.env.Brokers))}
	if c := r.env.Cluster; c != nil {
		brokers = []string{kv("KAFKA_BROKERS", join(c.slotBrokers(k)))}
	}
	if r.sc.SASL != "" {
		brokers = []string{kv("KAFKA_BROKERS", join(r.env.SASLBrokers)), kv("KAFKA_SASL_MECHANISM", r.sc.SASL),
			kv("KAFKA_SASL_USER", r.env.SASLUser), kv("KAFKA_SASL_PASSWORD", r.env.SASLPassword)}
	}
	return append(append(brokers,
		kv("KAFKA_TOPIC", r.topic), kv("KAFKA_GROUP", r.group),
		kv("REMEDIATIONS_TOPIC", effectTopics(r.topic).Remediations), kv("NOTIFICATIONS_TOPIC", effectTopics(r.topic).Notifications),
		kv("PAYLOAD_TRACKER_TOPIC", effectTopics(r.topic).PayloadStatus),
		kv("DATABASE_URL", r.listenerDB), kv("VMAAS_URL", r.listenerMock), kv("INVENTORY_URL", r.listenerMock),
		kv("LISTENER_DRAIN_TIMEOUT", "5s"), kv("KAFKA_SESSION_TIMEOUT", "3s"), kv("KAFKA_HEARTBEAT_INTERVAL", "500ms"),
		kv("LISTENER_BACKOFF_MAX", "2s"), kv("DB_MAX_OPEN_CONNS", "16"), kv("LOG_FORMAT", "json"),
		kv("LISTENER_PROGRESS_INTERVAL", "5s"),
		kv("LISTENER_HTTP_ADDR", "127.0.0.1:0"), kv("VMAAS_CACHE_SIZE", "0"), // every evaluation reaches the mock, which counts repeated ones
	), slices.Concat(r.sc.ListenerEnv, r.env.ListenerEnv)...)
}

func (r *run) startListener() error {
	_, err := r.startListenerWith()
	return err
}

// startListenerWith starts the next listener with extra settings on top of
// the scenario's.
func (r *run) startListenerWith(extra ...string) (*listenerProc, error) {
	r.started++
	name := fmt.Sprintf("%s-listener-%d", r.sc.Name, r.started)
	// Each process calls the mock by its own name, so the mock can tell
	// which process evaluated what (platform.CallerPrefix).
	named := r.listenerMock + platform.CallerPrefix + name
	slot := (r.started - 1) % clusterSlots
	env := append(append(r.listenerEnvSlot(slot), kv("VMAAS_URL", named), kv("INVENTORY_URL", named)), extra...)
	var status string
	if r.sc.StatusPorts || r.sc.StatusPort && r.started == 1 {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		env = append(env, kv("LISTENER_HTTP_ADDR", addr)) // the later value wins
		status = "http://" + addr + "/status.json"
		if r.started == 1 {
			r.statusURL = "http://" + addr + "/status"
		}
	}
	start := r.env.startListener
	if r.sc.Container {
		start = r.env.startContainer
	}
	p, err := start(name, env)
	if err != nil {
		return nil, err
	}
	p.status, p.slot = status, slot
	r.listeners = append(r.listeners, p)
	return p, nil
}

// live returns the listeners still running.
func (r *run) live() []*listenerProc {
	var out []*listenerProc
	for _, p := range r.listeners {
		if p.running() {
			out = append(out, p)
		}
	}
	return out
}

// Run executes sc and judges it.
func Run(ctx context.Context, env *Env, sc Scenario) (Line, error) {
	line := Line{Scenario: sc.Name}
	stamp := time.Now().Format("150405")
	r := &run{env: env, sc: sc, topic: "e2e-" + sc.Name + "-" + stamp, group: "e2e-" + sc.Name + "-" + stamp}
	ph := newPhases(env.Work, sc.Name)
	defer ph.close()
	var err error
	if r.dbURL, err = env.createDatabase(ctx, "e2e_"+strings.ReplaceAll(sc.Name, "-", "_")); err != nil {
		return line, err
	}
	partitions := sc.Partitions
	if partitions <= 0 {
		partitions = 8
	}
	if err := env.createTopics(r.topic, partitions); err != nil {
		return line, err
	}

	opts := loadgen.DefaultOptions()
	opts.Seed = uint64(len(sc.Name)*7919 + sc.Events)
	opts.Hosts, opts.Events, opts.BadShare, opts.SkipShare = sc.Hosts, sc.Events, sc.BadShare, sc.SkipShare
	opts.Shape, opts.Bulk = shape, false
	ds := platform.NewDataset(opts.Seed, platform.DefaultSize())
	plan := loadgen.NewPlan(opts)
	hostages, err := chooseHostages(plan, ds, shape, sc.Hostages)
	if err != nil {
		return line, err
	}
	r.plan, r.opts, r.ds, r.hostages = plan, opts, ds, hostages
	mockLatency := sc.MockLatency
	if mockLatency == "" {
		mockLatency = "longtail:50ms"
	}
	if r.mock, err = platform.NewServer(ds, platform.ServerOptions{Faults: platform.Faults{Latency: mockLatency, HangHosts: hostages},
		InventoryLatency: platform.Latency{Kind: "fixed", Base: 10 * time.Millisecond}, Shape: shape}); err != nil {
		return line, err
	}
	mockURL, stopMock, err := platform.Listen(r.mock)
	if err != nil {
		return line, err
	}
	defer stopMock()
	r.mockURL = mockURL
	r.listenerDB, r.listenerMock = r.dbURL, r.mockURL
	if env.Cluster != nil {
		drop, err := r.proxyDatabaseAndMock()
		if err != nil {
			return line, err
		}
		defer drop()
	}
	cfg, err := settingsOf(r.listenerEnv())
	if err != nil {
		return line, fmt.Errorf("the scenario's listener settings: %w", err)
	}

	// The stream is produced before the listeners start, unless hosts are
	// held hostage: then evenly over streamFor while they run (hostageStream).
	produce := loadgen.ProduceOptions{Brokers: env.Brokers, Topic: r.topic, Version: sarama.V3_6_0_0, Compression: "lz4"}
	var streamFor time.Duration
	if len(hostages) > 0 {
		if streamFor, err = hostageStream(plan, hostages, cfg.Pipeline.OwnFailureBound()); err != nil {
			return line, err
		}
		line.Figures = append(line.Figures, fmt.Sprintf("stream produced over %v", streamFor))
	} else if sc.StreamFor > 0 {
		streamFor = sc.StreamFor                  // the faults meet a steady stream, not a backlog
		produce.MetadataRefresh = 2 * time.Second // partitions added while it runs get records
	} else if _, err := loadgen.Produce(ctx, ds, opts, plan, produce); err != nil {
		return line, err
	}
	ph.mark("setup and produce")
	line.Events = len(plan.Items)
	hostageEvents := hostageUploads(plan, hostages)
	line.ExpectedDead = plan.BadCount() + hostageEvents
	line.ExpectedSkip = plan.SkipCount()
	// Events that ask VMaaS once and get an answer: not bad, not skipped (a
	// host without packages asks nothing), not deletes, not a hostage's.
	evaluating := -hostageEvents
	for _, it := range plan.Items {
		if it.Bad == "" && it.Skip == "" && it.Event.Type != "delete" {
			evaluating++
		}
	}
	for _, id := range hostages {
		plan.Expected[id].Unevaluated = true // never evaluated, so never stored
	}

	if sc.SASL != "" {
		if err := r.checkWrongPasswordRefused(); err != nil {
			line.Problems = append(line.Problems, err.Error())
		}
	}
	// The schema first, then the audit of what the outbox commits
	// (proving/effects), before any listener writes. Not for the image
	// scenario, which judges that one of its listeners migrates the schema:
	// its effects are checked without the audit.
	if !sc.Container {
		if err := installAudit(ctx, r.dbURL); err != nil {
			return line, err
		}
	}
	for i := 0; i < max(1, sc.Listeners); i++ {
		if err := r.startListener(); err != nil {
			return line, err
		}
	}
	defer func() {
		for _, p := range r.live() {
			_ = p.term(15 * time.Second)
		}
	}()

	// streaming: the stream's production has not ended; produced says how it
	// ended. Whatever way Run returns, the production stops first.
	streaming, produced := streamFor > 0, make(chan error, 1)
	if streaming {
		produce.Rate = float64(len(plan.Items)) / streamFor.Seconds()
		pctx, cancel := context.WithCancel(ctx)
		go func() {
			_, err := loadgen.Produce(pctx, ds, opts, plan, produce)
			produced <- err
		}()
		defer func() {
			cancel()
			if streaming {
				<-produced
			}
		}()
	}

	ph.mark("listeners started")
	began := time.Now()
	r.began = began
	r.watch = &watch{line: &line, lastProgress: began, lastCommitted: -1, pinnedAt: map[int32]int64{}, pinnedSince: map[int32]time.Time{}, firstCommit: map[int32]time.Time{}}
	if f, err := os.Create(filepath.Join(r.env.Work, r.sc.Name+"-offsets.log")); err == nil {
		r.watch.offsets = f
		defer f.Close()
	}
	w := r.watch
	faults := sc.Faults
	limit := 6 * time.Minute
	if sc.Limit > 0 {
		limit = sc.Limit
	}
	deadline := began.Add(limit)
	for {
		if time.Now().After(deadline) {
			line.Problems = append(line.Problems, fmt.Sprintf("did not finish within %v", limit))
			break
		}
		select {
		case <-ctx.Done():
			return line, ctx.Err()
		case <-time.After(lookInterval):
		}
		if streaming {
			select {
			case err := <-produced:
				streaming = false
				if err != nil {
					return line, fmt.Errorf("produce: %w", err)
				}
			default:
			}
		}
		if !r.look() {
			continue // the broker may be restarting
		}
		for len(faults) > 0 && due(faults[0].At, w.done, w.total) {
			f := faults[0]
			faults = faults[1:]
			if err := f.Do(r); err != nil {
				return line, fmt.Errorf("fault %s: %w", f.Name, err)
			}
			r.faults = append(r.faults, f.Name)
		}
		if w.done == w.total && len(faults) == 0 && !streaming {
			line.OffsetsAtEnd = true
			break
		}
		if len(r.live()) == 0 {
			line.Problems = append(line.Problems, "every listener exited")
			break
		}
	}
	line.Finish = time.Since(began)
	ph.mark("run")
	line.Faults = r.faults
	if !line.OffsetsAtEnd { // still stalled when the run gave up
		line.LongestStall = max(line.LongestStall, time.Since(w.lastProgress))
	}
	if !line.OffsetsAtEnd {
		line.Problems = append(line.Problems, "committed offsets did not reach the end offsets")
		line.Lost = int(w.total - max(w.lastCommitted, 0))
	}
	db, err := sql.Open("postgres", r.dbURL)
	if err != nil {
		return line, err
	}
	defer db.Close()
	// The relays publish what the records committed; the check reads the
	// topics once they have.
	if line.OffsetsAtEnd && len(r.live()) > 0 {
		if err := effects.WaitEmpty(ctx, db, 60*time.Second); err != nil {
			line.Problems = append(line.Problems, "effects: "+err.Error())
		}
	}
	ph.mark("outbox empty")
	r.stopping = time.Now()
	for _, p := range r.live() {
		if err := p.term(15 * time.Second); err != nil {
			line.Problems = append(line.Problems, err.Error())
		}
	}
	line.Problems = append(line.Problems, r.problems...)
	ph.mark("listeners stopped")
	rep, err := checker.Check(ctx, db, ds, shape, plan.Expected, 8)
	if err != nil {
		return line, err
	}
	ph.mark("rows checked")
	line.Lost += rep.Missing
	line.Wrong = rep.Wrong
	fx, err := effects.Check(ctx, env.Brokers, sarama.V3_6_0_0, effectTopics(r.topic), db)
	if err != nil {
		return line, fmt.Errorf("effects: %w", err)
	}
	ph.mark("effects read and checked")
	line.Figures = append(line.Figures, "effects: "+fx.Line())
	for i, p := range fx.Problems {
		if i == 5 {
			line.Problems = append(line.Problems, fmt.Sprintf("effects: %d more problems", len(fx.Problems)-i))
			break
		}
		line.Problems = append(line.Problems, "effects: "+p)
	}
	if line.Lost > 0 || line.Wrong > 0 {
		line.Problems = append(line.Problems, fmt.Sprintf("%d lost, %d wrong hosts, e.g. %v", line.Lost, line.Wrong, rep.Examples))
	}

	// The messages to skip were committed (offsets at end), stored or not
	// as their kind says (the checker), and not dead-lettered (below: the
	// dead letters are exactly the bad kinds). The listeners' own counts
	// say each was skipped for its reason, at least once (a record
	// redelivered after a rebalance is skipped again).
	skipped, complete := map[string]int64{}, true
	for _, p := range r.listeners {
		counts, ok, err := p.skippedByReason()
		if err != nil {
			return line, err
		}
		complete = complete && ok
		for reason, n := range counts {
			skipped[reason] += n
			line.Skipped += n
		}
	}
	if !complete {
		line.Skipped = -1
	} else {
		for kind, n := range plan.Skipped {
			if skipped[string(kind)] < int64(n) {
				line.Problems = append(line.Problems, fmt.Sprintf("skipped by reason %v, expected at least %v", skipped, plan.Skipped))
				break
			}
		}
	}

	// The broken messages (by key: each has a host of its own) must be
	// dead-lettered exactly, each with its reason. Any other dead letter is
	// wrong, unless the scenario holds hosts hostage: then they are judged
	// below.
	letters, _, err := env.deadLetters(r.topic + ".dlq")
	if err != nil {
		return line, err
	}
	ph.mark("dead letters read")
	badKeys := map[string]bool{}
	for _, it := range plan.Items {
		if it.Bad != "" {
			badKeys[it.Key] = true
		}
	}
	byReason, wantByReason := map[string]int{}, map[string]int{}
	for kind, n := range plan.Bad {
		wantByReason[string(kind)] = n
	}
	var others []deadLetter
	for _, d := range letters {
		if badKeys[string(d.letter.GetKey())] {
			byReason[d.reason]++
		} else {
			others = append(others, d)
		}
	}
	line.DeadLettered = len(letters)
	line.DeadByReasonOK = maps.Equal(byReason, wantByReason)
	if !line.DeadByReasonOK {
		line.Problems = append(line.Problems, fmt.Sprintf("broken messages dead-lettered by reason %v, expected %v", byReason, plan.Bad))
	}
	if sc.NoDeadLetters && line.DeadLettered > 0 {
		line.Problems = append(line.Problems, fmt.Sprintf("%d records dead-lettered, none expected", line.DeadLettered))
	}
	if len(hostages) > 0 {
		line.Problems = append(line.Problems, judgeHostageLetters(others, hostages, hostageEvents, cfg.Pipeline.MaxAttempts)...)
		bound := cfg.Pipeline.OwnFailureBound()
		if line.LongestPin > bound+pinSlack {
			line.Problems = append(line.Problems, fmt.Sprintf("a partition's committed offset stayed pinned %.1fs, the own-failure bound is %v (+%v allowed)",
				line.LongestPin.Seconds(), bound, pinSlack))
		}
		if hung := r.mock.Stats().VMaaSHung; hung == 0 {
			line.Problems = append(line.Problems, "the mock left no VMaaS call unanswered: the hostage fault did not fire")
		}
		line.Figures = append(line.Figures, fmt.Sprintf("hostage records dead-lettered %d/%d (own-failure bound %v, pin allowed %v; %d VMaaS calls left unanswered)",
			len(others), hostageEvents, bound, bound+pinSlack, r.mock.Stats().VMaaSHung))
	} else if len(others) > 0 {
		got := map[string]int{}
		for _, d := range others {
			got[d.reason]++
		}
		line.Problems = append(line.Problems, fmt.Sprintf("%d records dead-lettered that are not broken messages, by reason %v", len(others), got))
	}
	if sc.SASL != "" {
		if err := r.checkLogsHideSecrets(); err != nil {
			line.Problems = append(line.Problems, err.Error())
		}
	}
	line.Figures = append(line.Figures, r.notes...)
	s := r.mock.Stats()
	line.Duplicates = s.VMaaSCalls - s.VMaaS503 - s.VMaaSHung - int64(evaluating)
	if sc.Judge != nil {
		if err := sc.Judge(r, &line); err != nil {
			return line, err
		}
	}
	return line, nil
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// killRandom kill -9s a random live listener.
func killRandom(r *run) (*listenerProc, error) {
	live := r.live()
	if len(live) == 0 {
		return nil, errorf("no listener to kill")
	}
	p := live[rand.IntN(len(live))]
	p.kill9()
	return p, nil
}

// appendOnce appends s unless list holds it already.
func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// installAudit migrates the run's database and installs the audit of the
// outbox (proving/effects.InstallAudit).
func installAudit(ctx context.Context, url string) error {
	store, err := persistence.Open(ctx, url, persistence.DefaultPoolSettings())
	if err != nil {
		return fmt.Errorf("migrate the run's database: %w", err)
	}
	defer store.Close()
	return effects.InstallAudit(ctx, store.DB())
}
