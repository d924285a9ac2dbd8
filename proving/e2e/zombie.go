package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// The zombie: a listener stopped (SIGSTOP, as a paused VM or a long GC
// would) past its session timeout while its handler holds a record, whose
// partitions the group gives to another member meanwhile, and which then
// runs again. It must commit nothing for the partitions it lost, and its
// late write must not overwrite what the new owner stored since.
//
// To make the late write certain rather than likely, the fault uses a host
// of its own (the zombie host, outside the plan's): the mock holds its
// first event's VMaaS call, the listener holding it is the one stopped;
// the hold is lifted while it sleeps (its answer waits in its socket); the
// host's newer event is produced, and the stop lasts until another listener
// has applied it. When the zombie runs again its handler has the older
// event's evaluation in hand and goes on to store it: the row must stay at
// the newer event.

// zombieRecord is what the zombie fault did, for judgeZombie.
type zombieRecord struct {
	host, org      string
	listener       string
	older, newer   time.Time // the two events' timestamps
	stopped        time.Duration
	newerAppliedIn time.Duration // from the stop to the newer event stored
}

// zombieHostID is the zombie host's id: of the plan's seed, far past its
// hosts.
func zombieHostID(r *run) string { return platform.HostID(r.opts.Seed^0x2b1e, 0) }

func zombie(atLeast time.Duration) func(r *run) error {
	return func(r *run) error {
		z := &zombieRecord{host: zombieHostID(r), org: "org-zombie"}
		hang := platform.Faults{Latency: "longtail:50ms", HangHosts: []string{z.host}}
		if err := r.setFaults(hang); err != nil {
			return err
		}
		z.older = time.Now().UTC().Truncate(time.Millisecond)
		if err := r.produceZombie(z, platform.EventSpec{Type: "created", HostID: z.host, OrgID: z.org, Timestamp: z.older, RequestID: "req-zombie-0"}); err != nil {
			return err
		}
		var holder string
		if err := r.until(30*time.Second, "a listener's VMaaS call for the zombie host to hang", func() bool {
			for caller := range r.mock.Hung() {
				holder = caller
				return true
			}
			return false
		}); err != nil {
			return err
		}
		var p *listenerProc
		for _, l := range r.live() {
			if l.name == holder {
				p = l
			}
		}
		if p == nil {
			return errorf("the call hanging for the zombie host is %q's, not a running listener's", holder)
		}
		z.listener = p.name
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		stoppedAt := time.Now()
		// The hold's work is done: its answer goes to the stopped listener's
		// socket, and the new owner's calls for the host are served.
		if err := r.setFaults(platform.Faults{Latency: "longtail:50ms"}); err != nil {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			return err
		}
		z.newer = time.Now().UTC().Truncate(time.Millisecond)
		if !z.newer.After(z.older) {
			z.newer = z.older.Add(time.Millisecond)
		}
		if err := r.produceZombie(z, platform.EventSpec{Type: "updated", HostID: z.host, OrgID: z.org, Timestamp: z.newer, Revision: 1, RequestID: "req-zombie-1"}); err != nil {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			return err
		}
		err := r.until(2*time.Minute, "another listener to store the zombie host's newer event", func() bool {
			at, err := r.hostEventTime(z.org, z.host)
			return err == nil && at.Equal(z.newer)
		})
		z.newerAppliedIn = time.Since(stoppedAt)
		if err == nil && z.newerAppliedIn < atLeast {
			r.wait(atLeast - z.newerAppliedIn)
		}
		z.stopped = time.Since(stoppedAt)
		if cerr := p.cmd.Process.Signal(syscall.SIGCONT); cerr != nil {
			return cerr
		}
		if err != nil {
			return err
		}
		r.plan.Expected[z.host] = &loadgen.HostState{HostID: z.host, OrgID: z.org, Revision: 1, EventTime: z.newer, Events: 2}
		r.zombie = z
		r.note(fmt.Sprintf("%s stopped %.1fs holding the zombie host's older event; the newer one stored by another listener %.1fs into the stop",
			p.name, z.stopped.Seconds(), z.newerAppliedIn.Seconds()))
		return nil
	}
}

// produceZombie produces one event of the zombie host, keyed by it (the
// plan's producer is not used: its stream is the plan's).
func (r *run) produceZombie(z *zombieRecord, spec platform.EventSpec) error {
	body, err := loadgen.Render(r.ds, r.opts, loadgen.Item{Key: z.host, Event: spec})
	if err != nil {
		return err
	}
	cfg := r.env.saramaConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	producer, err := sarama.NewSyncProducer(r.env.Brokers, cfg)
	if err != nil {
		return err
	}
	defer producer.Close()
	_, _, err = producer.SendMessage(&sarama.ProducerMessage{Topic: r.topic, Key: sarama.StringEncoder(z.host), Value: sarama.ByteEncoder(body)})
	return err
}

// hostEventTime is the time of the event stored for a host.
func (r *run) hostEventTime(org, host string) (time.Time, error) {
	db, err := sql.Open("postgres", r.dbURL)
	if err != nil {
		return time.Time{}, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var at time.Time
	err = db.QueryRowContext(ctx, `SELECT s.last_event_time FROM system s JOIN account a ON a.id = s.account_id
		WHERE a.org_id = $1 AND s.inventory_id = $2`, org, host).Scan(&at)
	return at, err
}

// until looks (run.wait's way, so the run's watch goes on) until ok, for at
// most limit.
func (r *run) until(limit time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return errorf("waited %v for %s", limit, what)
		}
		r.wait(lookInterval)
	}
	return nil
}

// judgeZombie: the zombie got its older event's answer after the newer
// event was stored, and the host's row is at the newer event at the end.
// (That the zombie committed nothing for the partitions it lost is every
// scenario's check that no committed offset goes back, with committed =
// end and nothing lost: a commit of a lost partition moves it back, or
// past records its new owner has not finished, which would be lost.)
func judgeZombie(r *run, line *Line) error {
	z := r.zombie
	if z == nil {
		line.Problems = append(line.Problems, "the zombie fault did not run")
		return nil
	}
	older := platform.Fingerprint(r.ds.Profile(z.host, 0, shape).Packages)
	answered := 0
	for _, e := range r.mock.Evaluations() {
		if e.Caller == z.listener && e.Profile == older {
			answered++
		}
	}
	if answered == 0 {
		line.Problems = append(line.Problems, fmt.Sprintf("%s never got the answer for the zombie host's older event: its late write was not tried", z.listener))
	}
	at, err := r.hostEventTime(z.org, z.host)
	switch {
	case err != nil:
		line.Problems = append(line.Problems, fmt.Sprintf("the zombie host's row: %v", err))
	case !at.Equal(z.newer):
		line.Problems = append(line.Problems, fmt.Sprintf("the zombie host's row is at %s, not at its newer event %s: the zombie's late write regressed it",
			at.Format(time.RFC3339Nano), z.newer.Format(time.RFC3339Nano)))
	}
	refused := "unknown"
	for _, p := range r.listeners {
		if p.name == z.listener {
			if counts, ok, err := p.skippedByReason(); err == nil && ok {
				refused = fmt.Sprint(counts["older than applied"])
			}
		}
	}
	line.Figures = append(line.Figures, fmt.Sprintf("zombie host row at the newer event: %v (older event answered to %s %d time(s); its records skipped as older than applied: %s)",
		err == nil && at.Equal(z.newer), strings.TrimPrefix(z.listener, r.sc.Name+"-"), answered, refused))
	return nil
}
