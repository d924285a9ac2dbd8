package bench

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ledger"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// pool is the reference the actor pipeline is measured against when the
// handler costs nothing: a plain goroutine worker pool behind the same
// bridge (feed loop and credits), with the same ledger and ordering gate.
// Only the actors are gone: each claim is one owner goroutine with channels
// instead of a PartitionActor with a mailbox, and a fixed set of workers
// (one per process credit) replaces a spawned EvaluationActor per record.
//
// It keeps the ordering and commit guarantees but nothing the benchmark
// does not exercise: a failed handler is simply run again until it succeeds
// or the drain cancels it; there is no backoff, dead-lettering or panic
// supervision.
type pool struct {
	handler actors.Handler
	jobs    chan job // capacity G: runnable records never exceed admitted ones
	run     context.Context
	stop    context.CancelFunc
	workers sync.WaitGroup
	owners  sync.WaitGroup // claims' owner goroutines: they send on jobs
}

type job struct {
	record *messages.Record
	owner  *poolClaim
}

// newPool starts workers goroutines running handler.
func newPool(workers int, handler actors.Handler) *pool {
	run, stop := context.WithCancel(context.Background())
	p := &pool{handler: handler, jobs: make(chan job, workers), run: run, stop: stop}
	for range workers {
		p.workers.Go(p.work)
	}
	return p
}

func (p *pool) work() {
	for j := range p.jobs {
		for attempt := 1; ; attempt++ {
			err := p.handler.Handle(j.owner.run, j.record)
			if err == nil || j.owner.run.Err() != nil {
				break
			}
			time.Sleep(time.Duration(min(attempt, 100)) * time.Millisecond) // no hot loop on a failing handler
		}
		j.owner.done <- j.record.GetOffset()
	}
}

// close stops every claim still running, then the workers.
func (p *pool) close() {
	p.stop()
	p.owners.Wait() // no owner can send on jobs any more
	close(p.jobs)
	p.workers.Wait()
}

// newWorker is the BridgeConfig.NewWorker of the pool.
func (p *pool) newWorker(cfg actors.PartitionConfig) (actors.ClaimWorker, error) {
	run, cancel := context.WithCancel(p.run)
	c := &poolClaim{
		cfg: cfg, pool: p, run: run, cancel: cancel,
		admitted: make(chan *messages.Record, cfg.Settings.InFlightPerPartition),
		done:     make(chan int64, cfg.Settings.InFlightPerPartition),
		drain:    make(chan drainRequest),
		stopped:  make(chan struct{}),
		ledger:   ledger.New(cfg.Settings.InFlightPerPartition),
		gate:     ordering.NewGate(cfg.Settings.Ordering),
		records:  make(map[int64]*messages.Record, cfg.Settings.InFlightPerPartition),
		marked:   -1,
	}
	if cfg.Resume != nil {
		_ = c.ledger.Restore(*cfg.Resume)
	}
	p.owners.Add(1)
	go func() {
		defer p.owners.Done()
		c.own()
	}()
	return c, nil
}

type drainRequest struct {
	reply   chan *messages.DrainResult
	timeout time.Duration
}

// poolClaim is one claim: its owner goroutine alone touches the ledger, the
// gate and the records, as the partition actor does.
type poolClaim struct {
	cfg    actors.PartitionConfig
	pool   *pool
	run    context.Context
	cancel context.CancelFunc

	admitted chan *messages.Record
	done     chan int64 // capacity S: a worker never waits to report
	drain    chan drainRequest
	stopped  chan struct{}

	ledger     *ledger.Ledger
	gate       *ordering.Gate
	records    map[int64]*messages.Record
	running    int
	marked     int64
	markedMeta string
	dirty      bool // the ledger changed since the last commit
}

// Admit implements actors.ClaimWorker.
func (c *poolClaim) Admit(r *messages.Record) {
	select {
	case c.admitted <- r:
	case <-c.stopped:
		c.release(r) // not admitted: never marked, redelivered
	}
}

// Drain implements actors.ClaimWorker.
func (c *poolClaim) Drain(timeout time.Duration) (*messages.DrainResult, error) {
	reply := make(chan *messages.DrainResult, 1)
	limit := time.NewTimer(timeout + 2*time.Second)
	defer limit.Stop()
	select {
	case c.drain <- drainRequest{reply: reply, timeout: timeout}:
	case <-c.stopped:
		return nil, errors.New("pool claim already stopped")
	case <-limit.C:
		return nil, errors.New("pool claim did not take the drain")
	}
	select {
	case r := <-reply:
		return r, nil
	case <-limit.C:
		return nil, errors.New("pool claim did not drain")
	}
}

// Stopped implements actors.ClaimWorker.
func (c *poolClaim) Stopped() <-chan struct{} { return c.stopped }

func (c *poolClaim) own() {
	defer close(c.stopped)
	var reply chan *messages.DrainResult
	var deadline <-chan time.Time
	for {
		select {
		case r := <-c.admitted:
			if reply != nil {
				c.release(r) // arrived after the drain began: not admitted
				continue
			}
			c.admit(r)
		case off := <-c.done:
			c.running--
			c.finish(off)
		case req := <-c.drain:
			reply = req.reply
			c.gate.Clear() // held records never start: abandoned, redelivered
			deadline = time.After(req.timeout)
		case <-c.pool.run.Done():
			return // the pool is closing
		case <-deadline:
			c.cancel()
			c.complete(reply, true)
			return
		}
		if reply != nil && c.running == 0 {
			c.complete(reply, false)
			return
		}
		if c.dirty && len(c.done) == 0 && len(c.admitted) == 0 {
			c.commit() // once a burst is handled, as the actor's mailbox does
		}
	}
}

func (c *poolClaim) admit(r *messages.Record) {
	off := r.GetOffset()
	restored := c.ledger.Restored(off)
	if err := c.ledger.Admit(off); err != nil {
		c.release(r)
		return
	}
	if restored { // finished by the partition's earlier owner
		c.release(r)
		advanced, _ := c.ledger.Finish(off)
		c.progressed(advanced)
		return
	}
	c.records[off] = r
	if c.gate.Admit(r.GetKey(), off) {
		c.start(r)
	}
}

// start queues r for a worker. jobs has room for every credit, so this
// waits only when jobs of an earlier, timed-out drain still hold slots; it
// gives up when the claim's run ends (the record stays unfinished).
func (c *poolClaim) start(r *messages.Record) {
	select {
	case c.pool.jobs <- job{record: r, owner: c}:
		c.running++
	case <-c.run.Done():
	}
}

// release gives back r's credits and bytes.
func (c *poolClaim) release(r *messages.Record) {
	c.cfg.Release(1, c.cfg.Settings.Charge(c.cfg.Handler, r))
}

func (c *poolClaim) finish(off int64) {
	r := c.records[off]
	delete(c.records, off)
	advanced, err := c.ledger.Finish(off)
	if err != nil {
		return
	}
	c.release(r)
	if next, ok := c.gate.Release(r.GetKey()); ok {
		c.start(c.records[next])
	}
	c.progressed(advanced)
}

// progressed tells the bridge a new watermark at once; the commit waits for
// the end of the burst.
func (c *poolClaim) progressed(advanced bool) {
	if wm, ok := c.ledger.Watermark(); advanced && ok && c.cfg.Span != nil {
		c.cfg.Span.Advance(wm)
	}
	c.dirty = true
}

// commit marks the watermark with its metadata, as the partition actor does.
func (c *poolClaim) commit() {
	c.dirty = false
	wm, meta, ok := c.ledger.Commit(c.cfg.Settings.CommitMetadataMaxBytes)
	if !ok || wm < c.marked || (wm == c.marked && meta == c.markedMeta) {
		return
	}
	actors.MarkCommit(c.cfg.Marker, c.cfg.Topic, c.cfg.Partition, c.marked, wm, meta)
	c.marked, c.markedMeta = wm, meta
}

// complete answers the drain and gives back the credits of what never
// finished and of records queued but not admitted. The bridge stops calling
// Admit before it calls Drain, so nothing arrives after this.
func (c *poolClaim) complete(reply chan *messages.DrainResult, timedOut bool) {
	c.cancel()
	c.commit()
	abandoned := c.ledger.InFlight()
	var bytes int64
	for _, r := range c.records {
		bytes += c.cfg.Settings.Charge(c.cfg.Handler, r)
	}
	c.cfg.Release(abandoned, bytes)
	for len(c.admitted) > 0 {
		c.release(<-c.admitted)
	}
	reply <- &messages.DrainResult{Watermark: c.marked, Abandoned: int64(abandoned), TimedOut: timedOut}
}
