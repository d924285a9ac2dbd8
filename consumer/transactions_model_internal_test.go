package consumer

// A scripted model of sarama's transactional producer and of the brokers,
// driving claimTxn.commit directly: the committer's state machine under
// every fault sarama can report at each call.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

// modelBroker is what the brokers hold: the results committed (visible to
// read_committed readers) and the group's committed offset.
type modelBroker struct {
	mu      sync.Mutex
	results []string // values, in commit order
	offset  txnMark  // the group's committed mark
	gen     int      // the newest producer's generation (older ones are fenced)
	opens   int
}

// modelProducer models sarama's transactional producer; hook, when set,
// runs first for each call and may replace its default (handled true).
type modelProducer struct {
	sarama.SyncProducer
	b       *modelBroker
	gen     int
	status  sarama.ProducerTxnStatusFlag
	pending []string
	off     *txnMark
	hook    func(p *modelProducer, op string) (err error, handled bool)
	calls   []string
	landed  bool // a commit cut short after it landed: retries can only succeed or be cut again
}

func (p *modelProducer) call(op string) (error, bool) {
	p.calls = append(p.calls, op)
	if p.hook != nil {
		return p.hook(p, op)
	}
	return nil, false
}

func (p *modelProducer) TxnStatus() sarama.ProducerTxnStatusFlag { return p.status }

func (p *modelProducer) BeginTxn() error {
	if err, ok := p.call("begin"); ok {
		return err
	}
	if p.status != sarama.ProducerTxnFlagReady {
		return sarama.ErrTransitionNotAllowed
	}
	p.status = sarama.ProducerTxnFlagInTransaction
	return nil
}

func (p *modelProducer) SendMessages(msgs []*sarama.ProducerMessage) error {
	if err, ok := p.call("send"); ok {
		return err
	}
	if p.status != sarama.ProducerTxnFlagInTransaction {
		return errors.New("model: send outside a transaction")
	}
	for _, m := range msgs {
		v, _ := m.Value.Encode()
		p.pending = append(p.pending, string(v))
	}
	return nil
}

func (p *modelProducer) AddOffsetsToTxn(offsets map[string][]*sarama.PartitionOffsetMetadata, _ string) error {
	if err, ok := p.call("offsets"); ok {
		return err
	}
	if p.status&sarama.ProducerTxnFlagInTransaction == 0 {
		return sarama.ErrTransactionNotReady
	}
	for _, os := range offsets {
		for _, o := range os {
			p.off = &txnMark{set: true, offset: o.Offset, meta: *o.Metadata}
		}
	}
	return nil
}

// land commits the open transaction on the brokers.
func (p *modelProducer) land() {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if p.gen != p.b.gen {
		panic("model: a fenced producer committed")
	}
	p.b.results = append(p.b.results, p.pending...)
	if p.off != nil {
		p.b.offset = *p.off
	}
	p.pending, p.off = nil, nil
}

func (p *modelProducer) CommitTxn() error {
	if err, ok := p.call("commit"); ok {
		return err
	}
	if p.status&(sarama.ProducerTxnFlagInTransaction|sarama.ProducerTxnFlagCommittingTransaction) == 0 || p.status&sarama.ProducerTxnFlagInError != 0 {
		return errors.New("model: commit in state " + p.status.String())
	}
	p.land()
	p.status = sarama.ProducerTxnFlagReady
	return nil
}

func (p *modelProducer) AbortTxn() error {
	if err, ok := p.call("abort"); ok {
		return err
	}
	p.pending, p.off = nil, nil
	p.status = sarama.ProducerTxnFlagReady
	return nil
}

func (p *modelProducer) Close() error { return nil }

type modelClient struct{ sarama.Client }

func (modelClient) Close() error                       { return nil }
func (modelClient) Partitions(string) ([]int32, error) { return []int32{0}, nil }

// modelClaim is a claimTxn over the model.
type modelClaim struct {
	c    *claimTxn
	b    *modelBroker
	last *modelProducer
	// hook is given to every producer opened; read answers the committed
	// offset read (nil: the broker's).
	hook func(p *modelProducer, op string) (error, bool)
	read func() (actors.Committed, error)
}

func newModelClaim(t *testing.T) *modelClaim {
	m := &modelClaim{b: &modelBroker{}}
	open := func(id string) (*txnProducer, error) {
		m.b.mu.Lock()
		m.b.gen++
		m.b.opens++
		p := &modelProducer{b: m.b, gen: m.b.gen, status: sarama.ProducerTxnFlagReady, hook: m.hook}
		m.b.mu.Unlock()
		m.last = p
		return &txnProducer{client: modelClient{}, SyncProducer: p}, nil
	}
	committed := func(ctx context.Context, topic string, partition int32) (actors.Committed, error) {
		if m.read != nil {
			return m.read()
		}
		m.b.mu.Lock()
		defer m.b.mu.Unlock()
		if !m.b.offset.set {
			return actors.Committed{Offset: -1}, nil
		}
		return actors.Committed{Offset: m.b.offset.offset, Metadata: m.b.offset.meta}, nil
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(&tlogWriter{t}, nil))
	}
	owner := &transactions{open: open, committed: committed, group: "g", prefix: "p", interval: time.Hour,
		logger: log, claims: map[txnPartition]*claimTxn{}}
	p, _ := open("p-in-0")
	if err := p.BeginTxn(); err != nil {
		t.Fatal(err)
	}
	m.c = &claimTxn{owner: owner, topic: "in", partition: 0, id: "p-in-0", producer: p, openedAt: time.Now(),
		marked: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), log: log}
	return m
}

type tlogWriter struct{ t *testing.T }

func (w *tlogWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// stage writes the result "r<offset>" of the record at offset.
func (m *modelClaim) stage(t *testing.T, offset int64) {
	t.Helper()
	msgs := []*sarama.ProducerMessage{{Topic: "out", Value: sarama.StringEncoder(fmt.Sprint("r", offset))}}
	if err := m.c.stage(context.Background(), offset, msgs, []string{"out"}); err != nil {
		t.Fatalf("stage %d: %v", offset, err)
	}
}

// round runs a commit round in its own goroutine and fails past limit.
func (m *modelClaim) round(t *testing.T, final bool, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.c.gate.Lock()
		defer m.c.gate.Unlock()
		m.c.commit(final)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		close(m.c.stop) // ends a non-final round's retries
		<-done
		m.c.mu.Lock()
		defer m.c.mu.Unlock()
		t.Errorf("the commit round did not end within %v (status %s, calls %v)", limit, m.last.status, m.last.calls)
	}
}

func (m *modelClaim) counts() map[string]int {
	m.b.mu.Lock()
	defer m.b.mu.Unlock()
	n := map[string]int{}
	for _, r := range m.b.results {
		n[r]++
	}
	return n
}

// S1: sarama's CommitTxn or AbortTxn that needs an epoch bump (after any
// abortable error on Kafka >= 2.5) ends the transaction, moves to
// Initializing and bumps the epoch; when that InitProducerId exhausts its
// retries (coordinator loading / CONCURRENT_TRANSACTIONS for ~5 s), the
// call returns the error and the producer STAYS Initializing
// (transaction_manager.go initializeTransactions). No case of step
// matches Initializing: it falls to "no transaction" and calls BeginTxn,
// which sarama refuses (Initializing -> InTransaction is not a valid
// transition) for ever. Here: an abort after an abortable send error.
func TestTxnModelInitializingAfterAFailedEpochBumpTakesANewProducer(t *testing.T) {
	m := newModelClaim(t)
	failed := false
	m.hook = func(p *modelProducer, op string) (error, bool) {
		switch {
		case op == "abort" && !failed:
			// sarama: EndTxn(abort) went through, completeTransaction moved
			// to Initializing, InitProducerId (the epoch bump) exhausted
			// its retries.
			failed = true
			p.pending, p.off = nil, nil
			p.status = sarama.ProducerTxnFlagInitializing
			return sarama.ErrConcurrentTransactions, true
		case (op == "commit" || op == "abort") && p.status == sarama.ProducerTxnFlagInitializing:
			// sarama: nothing to end; completeTransaction, bump again (works now)
			p.status = sarama.ProducerTxnFlagReady
			return nil, true
		}
		return nil, false
	}
	m.c.producer.SyncProducer.(*modelProducer).hook = m.hook
	m.stage(t, 0)
	// an abortable error on the transaction (e.g. a send cut by a leader move)
	m.c.producer.SyncProducer.(*modelProducer).status = sarama.ProducerTxnFlagInError | sarama.ProducerTxnFlagAbortableError
	m.c.setMark(1, "")
	m.round(t, false, 8*time.Second)
	if got := m.counts()["r0"]; got != 1 {
		t.Errorf("result r0 committed %d times, want 1 (group offset %+v)", got, m.b.offset)
	}
}

// S1 (commit flavour): CommitTxn's EndTxn landed, then the epoch bump
// failed: CommitTxn returns an error with the producer Initializing. The
// round must neither stick nor commit the results again.
func TestTxnModelACommitThatLandedBeforeAFailedEpochBumpCountsOnce(t *testing.T) {
	m := newModelClaim(t)
	failed := false
	m.hook = func(p *modelProducer, op string) (error, bool) {
		switch {
		case op == "commit" && !failed && p.status&sarama.ProducerTxnFlagInTransaction != 0:
			failed = true
			p.land()
			p.status = sarama.ProducerTxnFlagInitializing
			return sarama.ErrConcurrentTransactions, true
		case (op == "commit" || op == "abort") && p.status == sarama.ProducerTxnFlagInitializing:
			p.status = sarama.ProducerTxnFlagReady
			return nil, true
		}
		return nil, false
	}
	m.c.producer.SyncProducer.(*modelProducer).hook = m.hook
	m.stage(t, 0)
	m.c.setMark(1, "")
	m.round(t, false, 8*time.Second)
	m.stage(t, 1)
	m.c.setMark(2, "")
	m.round(t, false, 8*time.Second)
	n := m.counts()
	if n["r0"] != 1 || n["r1"] != 1 {
		t.Errorf("committed results %v, want r0 and r1 once each (group offset %+v)", n, m.b.offset)
	}
}

// S5: a fatal error answering a commit that in fact landed; the new
// producer's read of the group's committed offset fails once (a
// coordinator moving: the very failover that caused the fatal error).
// replaceProducer takes the failed read for "did not land", carries the
// staged results and commits them again with the same mark: committed
// twice under read_committed.
func TestTxnModelAFailedReadOfTheCommittedOffsetDecidesNothing(t *testing.T) {
	m := newModelClaim(t)
	fired := false
	m.hook = func(p *modelProducer, op string) (error, bool) {
		if op == "commit" && !fired {
			fired = true
			p.land() // the coordinator committed; the answer is lost / fatal
			p.status = sarama.ProducerTxnFlagInError | sarama.ProducerTxnFlagFatalError
			return sarama.ErrInvalidProducerIDMapping, true
		}
		return nil, false
	}
	m.c.producer.SyncProducer.(*modelProducer).hook = m.hook
	reads := 0
	m.read = func() (actors.Committed, error) {
		reads++
		if reads == 1 {
			return actors.Committed{}, sarama.ErrNotCoordinatorForConsumer
		}
		m.b.mu.Lock()
		defer m.b.mu.Unlock()
		return actors.Committed{Offset: m.b.offset.offset, Metadata: m.b.offset.meta}, nil
	}
	m.stage(t, 0)
	m.c.setMark(1, "")
	m.round(t, false, 8*time.Second)
	if got := m.counts()["r0"]; got != 1 {
		t.Errorf("result r0 committed %d times under read_committed, want 1", got)
	}
}

// A randomized model run: records finish in order (meta ""), each with a
// result; rounds interleave with faults sarama can produce at each call.
// After each round: no result committed for a record the group's mark
// does not call finished, none twice; after the last (final) round with
// every record marked: each result exactly once.
func TestTxnModelRandomFaults(t *testing.T) {
	saved := txnRetry
	txnRetry = [2]time.Duration{time.Millisecond, time.Millisecond}
	t.Cleanup(func() { txnRetry = saved })
	t.Run("g", func(t *testing.T) {
		for seed := int64(1); seed <= modelSeeds(); seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				modelRun(t, seed)
			})
		}
	})
}

// modelSeeds is how many seeds TestTxnModelRandomFaults runs: 12, or
// PATCHFLOW_TXN_MODEL_SEEDS (400 passed when the model was written).
func modelSeeds() int64 {
	if n, err := strconv.ParseInt(os.Getenv("PATCHFLOW_TXN_MODEL_SEEDS"), 10, 64); err == nil && n > 0 {
		return n
	}
	return 12
}

func modelRun(t *testing.T, seed int64) {
	rng := newRng(seed)
	m := newModelClaim(t)
	trace := &[]string{}
	defer func() {
		if t.Failed() {
			t.Logf("trace: %v", *trace)
		}
	}()
	m.hook = func(p *modelProducer, op string) (error, bool) {
		if rng.intn(4) != 0 {
			return nil, false
		}
		switch op {
		case "commit":
			if p.status&sarama.ProducerTxnFlagInError != 0 {
				return nil, false
			}
			if p.landed {
				if rng.intn(2) == 0 {
					*trace = append(*trace, "commit-cut-again")
					return sarama.ErrOutOfBrokers, true
				}
				p.landed = false
				return nil, false
			}
			k := rng.intn(5)
			*trace = append(*trace, fmt.Sprintf("commit-fault-%d", k))
			switch k {
			case 0: // abortable, not landed
				p.status = sarama.ProducerTxnFlagInError | sarama.ProducerTxnFlagAbortableError
				return sarama.ErrUnknownProducerID, true
			case 1: // cut short, not landed
				p.status = sarama.ProducerTxnFlagEndTransaction | sarama.ProducerTxnFlagCommittingTransaction
				return sarama.ErrOutOfBrokers, true
			case 2: // cut short, landed
				p.land()
				p.landed = true
				p.status = sarama.ProducerTxnFlagEndTransaction | sarama.ProducerTxnFlagCommittingTransaction
				return sarama.ErrOutOfBrokers, true
			case 3: // fatal, not landed
				p.status = sarama.ProducerTxnFlagInError | sarama.ProducerTxnFlagFatalError
				return sarama.ErrInvalidProducerIDMapping, true
			default: // fatal, landed
				p.land()
				p.status = sarama.ProducerTxnFlagInError | sarama.ProducerTxnFlagFatalError
				return sarama.ErrInvalidProducerIDMapping, true
			}
		case "abort":
			*trace = append(*trace, "abort-cut")
			if p.status&sarama.ProducerTxnFlagFatalError != 0 {
				return nil, false
			}
			p.status = sarama.ProducerTxnFlagEndTransaction | sarama.ProducerTxnFlagAbortingTransaction
			return sarama.ErrOutOfBrokers, true
		case "send":
			if p.status != sarama.ProducerTxnFlagInTransaction {
				return nil, false
			}
			*trace = append(*trace, "send-fail")
			p.pending = append(p.pending, "partial-garbage") // written in part
			if rng.intn(2) == 0 {
				p.status = sarama.ProducerTxnFlagInError | sarama.ProducerTxnFlagAbortableError
			} else {
				p.status = sarama.ProducerTxnFlagInError | sarama.ProducerTxnFlagFatalError
			}
			return sarama.ErrNotEnoughReplicas, true
		case "begin":
			*trace = append(*trace, "begin-fail")
			return sarama.ErrOutOfBrokers, true
		case "offsets":
			*trace = append(*trace, "offsets-fail")
			return sarama.ErrOutOfBrokers, true
		}
		return nil, false
	}
	m.c.producer.SyncProducer.(*modelProducer).hook = m.hook
	check := func(final bool, total int64) {
		t.Helper()
		m.b.mu.Lock()
		defer m.b.mu.Unlock()
		seen := map[string]int{}
		for _, r := range m.b.results {
			seen[r]++
			var off int64
			if _, err := fmt.Sscanf(r, "r%d", &off); err != nil {
				t.Errorf("seed %d: garbage committed: %q", seed, r)
				continue
			}
			if seen[r] > 1 {
				t.Errorf("seed %d: %s committed %d times", seed, r, seen[r])
			}
			if !m.b.offset.set || off >= m.b.offset.offset {
				t.Errorf("seed %d: %s committed, group mark %+v does not name it", seed, r, m.b.offset)
			}
		}
		if final {
			for i := int64(0); i < total; i++ {
				if seen[fmt.Sprint("r", i)] != 1 {
					t.Errorf("seed %d: r%d committed %d times at the end (mark %+v)", seed, i, seen[fmt.Sprint("r", i)], m.b.offset)
				}
			}
		}
	}
	var next int64
	for range 12 {
		for range rng.intn(3) {
			// stage only into an open, healthy transaction (as a handler
			// would succeed); else the record fails and retries later.
			p := m.c.producer.SyncProducer.(*modelProducer)
			if p.status == sarama.ProducerTxnFlagInTransaction {
				msgs := []*sarama.ProducerMessage{{Topic: "out", Value: sarama.StringEncoder(fmt.Sprint("r", next))}}
				if err := m.c.stage(context.Background(), next, msgs, []string{"out"}); err == nil {
					next++
				}
			}
		}
		if rng.intn(2) == 0 {
			m.c.setMark(next, "")
			*trace = append(*trace, fmt.Sprint("mark-", next))
		}
		*trace = append(*trace, fmt.Sprint("round(staged-to-", next, ")"))
		m.round(t, false, 5*time.Second)
		check(false, next)
		if t.Failed() {
			return
		}
	}
	m.c.setMark(next, "")
	m.hook = nil
	m.c.producer.SyncProducer.(*modelProducer).hook = nil
	if m.last != nil {
		m.last.hook = nil
	}
	m.round(t, true, 5*time.Second)
	check(true, next)
}

type rng struct{ s uint64 }

func newRng(seed int64) *rng { return &rng{uint64(seed)*0x9E3779B97F4A7C15 + 1} }
func (r *rng) intn(n int) int {
	r.s ^= r.s << 13
	r.s ^= r.s >> 7
	r.s ^= r.s << 17
	return int(r.s % uint64(n))
}
