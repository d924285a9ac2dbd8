package consumer_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
)

// review39bPanicky is a BatchHandler whose Handle panics on "boom".
type review39bPanicky struct{}

func (review39bPanicky) Handle(_ context.Context, r *consumer.Record) error {
	if string(r.Value) == "boom" {
		panic("boom in Handle")
	}
	return nil
}

func (review39bPanicky) HandleBatch(_ context.Context, rs []*consumer.Record) []error {
	errs := make([]error, len(rs))
	for i, r := range rs {
		if string(r.Value) == "boom" {
			panic("boom in HandleBatch")
		}
		_ = i
	}
	return errs
}

// A batch of one calls Handle in the batcher's goroutine, outside every
// recover: a panicking Handle must be a failed attempt (retried; held when
// nothing can judge it), not the end of the process. Run in a
// child process so that the crash is reported as a failure.
func TestReview39bBatchOfOnePanicKillsTheProcess(t *testing.T) {
	if os.Getenv("REVIEW39B_CHILD") == "batch-of-one" {
		broker, err := embedded.Start(1, "lone")
		if err != nil {
			t.Fatal(err)
		}
		defer broker.Close()
		produce(t, broker.Addrs(), "lone", []string{"k"}, []string{"boom"})
		c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "lone", Group: "lone", MaxAttempts: 2,
			BackoffMin: 10 * time.Millisecond, BatchSize: 8, BatchLinger: 5 * time.Millisecond}, review39bPanicky{})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(c)
		// Failing alone, with nothing else to judge by, it is held and
		// retried (never dead-lettered on a guess): the process survives
		// its panics.
		waitFor(t, "the panicking record retried", 30*time.Second, func() bool { return c.Stats().Retried >= 3 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReview39bBatchOfOnePanicKillsTheProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REVIEW39B_CHILD=batch-of-one")
	out, err := cmd.CombinedOutput()
	if err != nil {
		const keep = 1500
		s := string(out)
		if len(s) > keep {
			s = s[:keep]
		}
		t.Fatalf("the process running the consumer died (%v) on a panic in Handle called for a batch of one:\n%s", err, s)
	}
}

// review39bSlowCleanup is a BatchHandler that waits for its ctx and then
// takes cleanup to return (a rollback), well within the drain's cancel
// grace.
type review39bSlowCleanup struct {
	cleanup  time.Duration
	inBatch  atomic.Int32 // records inside a running HandleBatch
	returned chan struct{}
	once     sync.Once
}

func (h *review39bSlowCleanup) Handle(ctx context.Context, r *consumer.Record) error {
	return h.HandleBatch(ctx, []*consumer.Record{r})[0]
}

func (h *review39bSlowCleanup) HandleBatch(ctx context.Context, rs []*consumer.Record) []error {
	h.inBatch.Add(int32(len(rs)))
	<-ctx.Done()
	time.Sleep(h.cleanup)
	h.inBatch.Add(-int32(len(rs)))
	if len(rs) > 1 {
		h.once.Do(func() { close(h.returned) })
	}
	errs := make([]error, len(rs))
	for i := range errs {
		errs[i] = ctx.Err()
	}
	return errs
}

// The drain gives cancelled handlers its cancel grace (a tenth of
// DrainTimeout) to return, so that no handler runs once Run returned.
// A HandleBatch that returns 200 ms after its ctx ends (grace: 500 ms)
// must therefore have returned when Run does; the batcher's attempts
// return at ctx.Done without waiting for it, so it outlives Run.
func TestReview39bBatchOutlivesRun(t *testing.T) {
	broker, err := embedded.Start(1, "slowbatch")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	produce(t, broker.Addrs(), "slowbatch", []string{"a", "b", "c"}, []string{"1", "2", "3"})
	h := &review39bSlowCleanup{cleanup: 200 * time.Millisecond, returned: make(chan struct{})}
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "slowbatch", Group: "slowbatch", DrainTimeout: 5 * time.Second,
		BatchSize: 8, BatchLinger: 100 * time.Millisecond}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "a batch of several records running", 20*time.Second, func() bool { return h.inBatch.Load() >= 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	n := h.inBatch.Load()
	<-h.returned // for goleak
	if n != 0 {
		t.Fatalf("Run returned while HandleBatch still ran with %d records (it returns 200 ms after its ctx, within the 500 ms cancel grace)", n)
	}
}

// review39bBlocking is a BatchHandler that holds every record until its
// ctx is done, noting which records are inside a running call.
type review39bBlocking struct {
	mu      sync.Mutex
	running map[string]bool // value -> inside HandleBatch/Handle on member A
	batched atomic.Int32
}

func (h *review39bBlocking) Handle(ctx context.Context, r *consumer.Record) error {
	return h.HandleBatch(ctx, []*consumer.Record{r})[0]
}

func (h *review39bBlocking) HandleBatch(ctx context.Context, rs []*consumer.Record) []error {
	h.mu.Lock()
	for _, r := range rs {
		h.running[string(r.Value)] = true
	}
	h.mu.Unlock()
	if len(rs) > 1 {
		h.batched.Add(1)
	}
	<-ctx.Done() // a handler that honours its ctx
	h.mu.Lock()
	for _, r := range rs {
		delete(h.running, string(r.Value))
	}
	h.mu.Unlock()
	errs := make([]error, len(rs))
	for i := range errs {
		errs[i] = ctx.Err()
	}
	return errs
}

// A record revoked from a member (cooperative-sticky: its partition moves,
// the other stays) is cut short there at the drain; the batch it is in
// keeps running since its batchmate's partition stayed, so its ctx is not
// done: the handler cannot stop, and the new owner runs the same record
// (same key) at once. Key order: one record per key at a time.
func TestReview39bRevokedRecordStillRunsInItsBatch(t *testing.T) {
	broker, err := embedded.Start(2, "coop")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(broker.Addrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for part := range int32(2) {
		v := fmt.Sprint("p", part)
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "coop", Partition: part, Key: sarama.StringEncoder("k" + v), Value: sarama.StringEncoder(v)}); err != nil {
			t.Fatal(err)
		}
	}
	_ = p.Close()

	a := &review39bBlocking{running: map[string]bool{}}
	ca, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "coop", Group: "coop", DrainTimeout: 2 * time.Second,
		SessionTimeout: 6 * time.Second, HeartbeatInterval: time.Second, BatchSize: 8, BatchLinger: 300 * time.Millisecond, ClientID: "a"}, a)
	if err != nil {
		t.Fatal(err)
	}
	stopA := run(ca)
	defer func() { _ = stopA() }()
	waitFor(t, "both records in one batch on member A", 20*time.Second, func() bool { return a.batched.Load() == 1 })

	var overlap atomic.Value
	var handledB atomic.Int32
	hb := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		a.mu.Lock()
		if a.running[string(r.Value)] {
			overlap.Store(string(r.Value))
		}
		a.mu.Unlock()
		handledB.Add(1)
		return nil
	})
	cb, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "coop", Group: "coop", DrainTimeout: 2 * time.Second,
		SessionTimeout: 6 * time.Second, HeartbeatInterval: time.Second, ClientID: "b"}, hb)
	if err != nil {
		t.Fatal(err)
	}
	stopB := run(cb)
	defer func() { _ = stopB() }()
	waitFor(t, "member B handled the record of the partition it took", 40*time.Second, func() bool { return handledB.Load() >= 1 })
	if v := overlap.Load(); v != nil {
		a.mu.Lock()
		still := a.running[v.(string)]
		a.mu.Unlock()
		t.Fatalf("record %s ran on member B while member A's HandleBatch still held it (its ctx not done although the record was revoked and abandoned; still running on A now: %v)", v, still)
	}
}

// review39bPoisonBatch is a BatchHandler that panics whenever "poison" is
// in its batch; Handle alone fails only the poison.
type review39bPoisonBatch struct {
	mu      sync.Mutex
	handled map[string]int
}

func (h *review39bPoisonBatch) Handle(_ context.Context, r *consumer.Record) error {
	if string(r.Value) == "poison" {
		panic("poison alone")
	}
	h.mu.Lock()
	h.handled[string(r.Value)]++
	h.mu.Unlock()
	return nil
}

func (h *review39bPoisonBatch) HandleBatch(_ context.Context, rs []*consumer.Record) []error {
	for _, r := range rs {
		if string(r.Value) == "poison" {
			panic("poison in the batch")
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range rs {
		h.handled[string(r.Value)]++
	}
	return make([]error, len(rs))
}

// A panic fails every record of its batch (documented); their retries
// gather again with the poison, every attempt fails together, so the rule
// reads a shared outage: the records of other keys and of the other
// partition never finish (nothing committed), retried without limit. The
// same records without batches (control below): the six handled and
// committed, the poison alone held.
func TestReview39bPanicInABatchHoldsEveryBatchmate(t *testing.T) {
	review39bPoison(t, 16)
}

// Control (passes): the same records without batches.
func TestReview39bControlPanicWithoutBatches(t *testing.T) {
	review39bPoison(t, 1)
}

func review39bPoison(t *testing.T, batchSize int) {
	broker, err := embedded.Start(2, "poisonbatch")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	var ks, vs []string
	ks, vs = append(ks, "kp"), append(vs, "poison")
	for i := range 6 {
		ks, vs = append(ks, fmt.Sprint("k", i)), append(vs, fmt.Sprint("v", i))
	}
	produce(t, broker.Addrs(), "poisonbatch", ks, vs)
	h := &review39bPoisonBatch{handled: map[string]int{}}
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "poisonbatch", Group: "poisonbatch", MaxAttempts: 3,
		BackoffMin: 50 * time.Millisecond, BackoffMax: 50 * time.Millisecond, BatchSize: batchSize, BatchLinger: 200 * time.Millisecond}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && c.Stats().Succeeded < 6 {
		time.Sleep(50 * time.Millisecond)
	}
	s := c.Stats()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s.Succeeded != 6 {
		t.Fatalf("after 20 s: %d of the 6 records of other keys handled (%d dead-lettered, %d retried): one panicking record holds every record it is batched with, on every partition", s.Succeeded, s.DeadLettered, s.Retried)
	}
}

// review39bHangsOnce is a BatchHandler whose first batch ignores its ctx
// for hang; it counts records of one key running at once.
type review39bHangsOnce struct {
	hang    time.Duration
	first   atomic.Bool
	mu      sync.Mutex
	running map[string]int
	overlap []string
	batches atomic.Int32
	wg      sync.WaitGroup
}

func (h *review39bHangsOnce) Handle(ctx context.Context, r *consumer.Record) error {
	return h.HandleBatch(ctx, []*consumer.Record{r})[0]
}

func (h *review39bHangsOnce) HandleBatch(_ context.Context, rs []*consumer.Record) []error {
	h.wg.Add(1)
	defer h.wg.Done()
	h.batches.Add(1)
	h.mu.Lock()
	for _, r := range rs {
		k := string(r.Key)
		h.running[k]++
		if h.running[k] > 1 {
			h.overlap = append(h.overlap, k+"/"+string(r.Value))
		}
	}
	h.mu.Unlock()
	if len(rs) > 1 && h.first.CompareAndSwap(false, true) {
		time.Sleep(h.hang) // a stuck bulk write that ignores ctx
	}
	h.mu.Lock()
	for _, r := range rs {
		h.running[string(r.Key)]--
	}
	h.mu.Unlock()
	return make([]error, len(rs))
}

// A HandleBatch stuck past its records' attempt deadline: each record's
// attempt returns DeadlineExceeded at once (the batcher does not wait for
// the call), is retried, and runs again in a new batch while the stuck
// call still holds it. With Handle, the attempt (and so the key) stays
// busy until the call returns. Key order: one record per key at a time.
func TestReview39bStuckBatchRunsAKeyTwiceAtOnce(t *testing.T) {
	broker, err := embedded.Start(1, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	produce(t, broker.Addrs(), "stuck", []string{"a", "b", "a", "b"}, []string{"1", "1", "2", "2"})
	h := &review39bHangsOnce{hang: 3 * time.Second, running: map[string]int{}}
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "stuck", Group: "stuck", AttemptTimeout: 500 * time.Millisecond,
		BackoffMin: 10 * time.Millisecond, BatchSize: 8, BatchLinger: 50 * time.Millisecond}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "every record handled", 30*time.Second, func() bool { return c.Stats().Succeeded == 4 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	h.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.overlap) > 0 {
		t.Fatalf("records ran while another attempt of their key was still inside HandleBatch: %v (%d calls)", h.overlap, h.batches.Load())
	}
}

// Control for TestReview39bBatchOutlivesRun (passes): the same handler
// without batches (BatchSize 1) has returned when Run does.
func TestReview39bControlHandleReturnsBeforeRun(t *testing.T) {
	broker, err := embedded.Start(1, "slowone")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	produce(t, broker.Addrs(), "slowone", []string{"a", "b", "c"}, []string{"1", "2", "3"})
	h := &review39bSlowCleanup{cleanup: 200 * time.Millisecond, returned: make(chan struct{})}
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "slowone", Group: "slowone", DrainTimeout: 5 * time.Second,
		BatchSize: 1}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "records running", 20*time.Second, func() bool { return h.inBatch.Load() >= 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := h.inBatch.Load(); n != 0 {
		t.Fatalf("Run returned while Handle still ran for %d records", n)
	}
}
