package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// A commit metadata too small to name what finished above a stuck record:
// the results of those records are never committed before a mark names
// them (the transaction holding them is aborted and written again once
// open past txnAheadLimit, shortened here to 300 ms); after a crash the
// rerun commits each once. Before the fix, past the limit the transaction
// committed them with no mark naming their records, and the rerun
// committed them twice.
func TestTxnResultsWaitForAMarkThatNamesThem(t *testing.T) {
	defer consumer.SetTxnAheadLimit(300 * time.Millisecond)()
	broker, err := embedded.Start(1, "in", "out")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	brokers := broker.Addrs()
	var aborts atomic.Int64
	broker.Cluster().ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		broker.Cluster().KeepControl()
		if !kreq.(*kmsg.EndTxnRequest).Commit {
			aborts.Add(1)
		}
		return nil, nil, false
	})
	const n = 20
	ks, vs := make([]string, n), make([]string, n)
	for i := range n {
		ks[i], vs[i] = fmt.Sprint("k", i), strconv.Itoa(i)
	}
	produce(t, brokers, "in", ks, vs)

	var block atomic.Bool
	block.Store(true)
	h := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		if r.Offset == 0 && block.Load() {
			<-ctx.Done() // stuck: holds the watermark at 0
			return ctx.Err()
		}
		r.Produce(consumer.Message{Topic: "out", Key: r.Key, Value: r.Value})
		return nil
	})
	cfg := consumer.Config{Brokers: brokers, Topic: "in", Group: "g", KafkaVersion: "3.6.0", CommitMode: consumer.CommitTransactional,
		CommitInterval: 30 * time.Millisecond, BackoffMin: 10 * time.Millisecond, CommitMetadataMaxBytes: 1, DrainTimeout: 2 * time.Second}
	c, err := consumer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "the transaction aborted and written again twice", 30*time.Second, func() bool { return aborts.Load() >= 2 })
	p, err := offsets.Read(brokers, "in", "g")
	if err != nil {
		t.Fatal(err)
	}
	visible := readIsolated(t, brokers, "out", sarama.ReadCommitted)
	t.Logf("first run: committed offset %d metadata %q; %d results visible under read_committed", p.Committed[0], p.Metadata[0], len(visible))
	if len(visible) > 0 && p.Committed[0] == 0 {
		t.Errorf("%d results visible under read_committed while the committed offset is 0 (metadata %q): no commit calls their records finished", len(visible), p.Metadata[0])
	}
	consumer.Crash(true)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	consumer.Crash(false)

	block.Store(false)
	c, err = consumer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop = run(c)
	waitFor(t, "everything committed", 60*time.Second, func() bool {
		p, err := offsets.Read(brokers, "in", "g")
		return err == nil && p.Committed[0] == p.Ends[0]
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range readIsolated(t, brokers, "out", sarama.ReadCommitted) {
		seen[string(m.Value)]++
	}
	dup := 0
	for i := range n {
		if seen[strconv.Itoa(i)] != 1 {
			dup++
			if dup <= 3 {
				t.Errorf("record %d has %d committed results, want 1", i, seen[strconv.Itoa(i)])
			}
		}
	}
	if dup > 3 {
		t.Errorf("... %d records in all without exactly one committed result", dup)
	}
}

// A record's wait that ends as its results are acknowledged: the record
// finishes only if its results were staged (so written again should the
// transaction abort). Before the fix, stage could return nil while the
// write had counted the transaction dirty instead (about once in 2.4
// million here): the next commit aborted it and rewrote the staged
// results without them, and the mark called the record finished.
func TestTxnStageFinishesARecordOnlyWithItsResultsStaged(t *testing.T) {
	// Many more threads than cores: a thread preempted between stage's
	// mu.Unlock and its look at done opens the window.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	const workers, each = 16, 150000 // about 4 s
	type res struct{ lost, dirty int }
	ch := make(chan res, workers)
	for range workers {
		go func() { l, d := consumer.StageRace(each); ch <- res{l, d} }()
	}
	lost, dirty := 0, 0
	for range workers {
		r := <-ch
		lost, dirty = lost+r.lost, dirty+r.dirty
	}
	if lost > 0 {
		t.Errorf("%d of %d stages returned nil with their results not staged (%d with the transaction marked dirty: aborted and rewritten without them)", lost, workers*each, dirty)
	}
}

// A claim's last commit backs off between tries. Before the fix, End's
// closed stop made retry return at once: a failing last commit tried back
// to back for txnEndBudget (30 s), a warning per try.
func TestTxnLastCommitBacksOff(t *testing.T) {
	took, again := consumer.FinalRetryWait(100 * time.Millisecond)
	if again && took < 50*time.Millisecond {
		t.Errorf("retry during End waited %v before trying again, want the 100ms backoff", took)
	}
}

// A fatal error answering a commit: a new producer (which aborts what the
// old one left), the group's committed offset says the commit did not
// take effect, and the staged results are written again and committed:
// each record's result once. The commit metadata is too small to name
// the records finished above a held one, so their results wait in the
// transaction (past txnAheadLimit, shortened to 300 ms, written again)
// until the held record finishes and the commit that names them fails.
// Before the fix a commit could carry the mark committed before with
// results its records' marks did not name, and a fatal error then read as
// "took effect": the results were dropped and their records never run
// again.
func TestTxnFatalCommitErrorLosesNoResult(t *testing.T) { commitFaultLosesNoResult(t, false) }

// A commit cut short (its connection closed before the answer): the
// producer stays committing, and only a second CommitTxn gets it out (a
// new transaction cannot begin before). Before the fix, the committer
// took it for an abort and called BeginTxn: "invalid transition
// attempted" for good, the partition's commits stopped (seen on the
// three-node cluster, make txn-failover-library).
func TestTxnCommitCutShortIsCommittedAgain(t *testing.T) { commitFaultLosesNoResult(t, true) }

func commitFaultLosesNoResult(t *testing.T, cut bool) {
	defer consumer.SetTxnAheadLimit(300 * time.Millisecond)()
	broker, err := embedded.Start(1, "in", "out")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	brokers := broker.Addrs()
	var armed, fired atomic.Bool
	var firstCut time.Time // the control functions run one at a time
	broker.Cluster().ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.EndTxnRequest)
		if cut && req.Commit && fired.Load() && time.Since(firstCut) < 7*time.Second {
			broker.Cluster().KeepControl()
			return nil, errors.New("cut"), true // past sarama's own retries (50 of 100 ms)
		}
		if !req.Commit || !armed.Load() || fired.Load() {
			return nil, nil, false
		}
		fired.Store(true)
		if cut {
			broker.Cluster().KeepControl()
			firstCut = time.Now()
			return nil, errors.New("cut"), true // the connection closes: the commit's outcome is unknown
		}
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.Version = req.GetVersion()
		resp.ErrorCode = kerr.InvalidProducerIDMapping.Code // sarama: fatal
		return resp, nil, true
	})
	const n = 20
	ks, vs := make([]string, n), make([]string, n)
	for i := range n {
		ks[i], vs[i] = fmt.Sprint("k", i), strconv.Itoa(i)
	}
	produce(t, brokers, "in", ks, vs)

	release := make(chan struct{})
	h := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		switch {
		case r.Offset == 0:
			return nil // finishes at once, no result: the first commit is (1, "")
		case r.Offset == 1:
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		default:
			time.Sleep(time.Second) // the first commit (offset 0, nothing staged) lands first
		}
		r.Produce(consumer.Message{Topic: "out", Key: r.Key, Value: r.Value})
		return nil
	})
	cfg := consumer.Config{Brokers: brokers, Topic: "in", Group: "g", KafkaVersion: "3.6.0", CommitMode: consumer.CommitTransactional,
		CommitInterval: 30 * time.Millisecond, BackoffMin: 10 * time.Millisecond, CommitMetadataMaxBytes: 1, DrainTimeout: 2 * time.Second}
	c, err := consumer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	defer func() { _ = stop() }()
	waitFor(t, "the records after the held one handled", 30*time.Second, func() bool { return c.Stats().Succeeded >= n-1 })
	armed.Store(true)
	close(release)
	waitFor(t, "the fatal EndTxn", 30*time.Second, fired.Load)
	waitFor(t, "everything committed", 60*time.Second, func() bool {
		p, err := offsets.Read(brokers, "in", "g")
		return err == nil && p.Committed[0] == p.Ends[0]
	})
	seen := map[string]int{}
	for _, m := range readIsolated(t, brokers, "out", sarama.ReadCommitted) {
		seen[string(m.Value)]++
	}
	bad := 0
	for i := 1; i < n; i++ {
		if seen[strconv.Itoa(i)] != 1 {
			if bad++; bad <= 3 {
				t.Errorf("record %d has %d committed results, want 1", i, seen[strconv.Itoa(i)])
			}
		}
	}
	if bad > 3 {
		t.Errorf("... %d records in all without exactly one committed result", bad)
	}
}
