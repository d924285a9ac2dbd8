// Package transactions probes sarama's transactional producer under broker
// failures, to decide on evidence whether a transactional mode (results and
// offsets in one transaction) can rest on it: Probe runs the classic
// consume-transform-produce loop, one transactional producer per input
// partition, while nodes of a three-node cluster are killed, then reads the
// output back under read_committed and counts what exactly-once forbids.
package transactions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// Options are a probe's sizes and the cluster's controls.
type Options struct {
	Brokers      []string
	In, Out      string // topics: In holds the input, Out gets one record per input record
	Group        string // the group whose offsets the transactions commit
	Partitions   int32  // In's and Out's partition count
	PerPartition int64  // input records per partition
	Batch        int    // input records per transaction
	Pause        time.Duration
	// Every, Down: a node is killed every Every (once the loop has begun)
	// and started again Down later, Rounds times; Kill and Start act on
	// node ids.
	Every, Down time.Duration
	Rounds      int
	Kill, Start func(node int32) error
	// Stall gives up on a partition that committed nothing for this long.
	Stall time.Duration
	Log   io.Writer
	// Library runs the loop as the consumer library's transactional mode
	// instead of the hand-written loop: a handler that waits Latency, at
	// most InFlight records at once.
	Library  bool
	Latency  time.Duration
	InFlight int
	// Periodic, with Library, runs its periodic mode (results produced
	// before each record finishes, at least once) instead: duplicates
	// are counted, not failed, and only a result's first copy must come
	// in order.
	Periodic bool
}

// Report is what a probe counted.
type Report struct {
	Transactions int64 // committed
	Aborted      int64 // aborted after an abortable error
	Fatal        int64 // producers replaced after a fatal error
	// CommitRetries are commits that failed and succeeded when called
	// again; Ambiguous, failed commits the group's offset then showed
	// committed all the same.
	CommitRetries, Ambiguous int64
	Stuck                    []string
	// Read back under read_committed: input offsets with no output, with
	// more than one, and partitions whose committed offset is not the end.
	// OutOfOrder: results of one input partition (one key) read before
	// one of a lower input offset (with Periodic, first copies only).
	Missing, Duplicated, OutOfOrder int64
	// Library: the run was the library's; Periodic: in its periodic mode,
	// where duplicates are allowed.
	Library, Periodic bool
	OffsetsWrong      []string
	Kills             []string
	LongestStall      time.Duration
}

// Probe produces the input, runs the loop with the faults, and checks.
func Probe(ctx context.Context, o Options) (Report, error) {
	rep := Report{Library: o.Library, Periodic: o.Library && o.Periodic}
	began := time.Now()
	logf := func(format string, a ...any) {
		fmt.Fprintf(o.Log, "%7.3fs "+format+"\n", append([]any{time.Since(began).Seconds()}, a...)...)
	}
	admin, err := newClient(o.Brokers, "")
	if err != nil {
		return rep, err
	}
	defer admin.Close()
	if err := produceInput(admin, o); err != nil {
		return rep, fmt.Errorf("input: %w", err)
	}
	logf("input: %d records on each of %d partitions", o.PerPartition, o.Partitions)

	var mu sync.Mutex
	var wg sync.WaitGroup
	done := make(chan struct{})
	for p := int32(0); p < o.Partitions && !o.Library; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := worker{o: o, p: p, logf: logf}
			r := w.run(ctx)
			mu.Lock()
			defer mu.Unlock()
			rep.Transactions += r.Transactions
			rep.Aborted += r.Aborted
			rep.Fatal += r.Fatal
			rep.Ambiguous += r.Ambiguous
			rep.CommitRetries += r.CommitRetries
			rep.Stuck = append(rep.Stuck, r.Stuck...)
			rep.LongestStall = max(rep.LongestStall, r.LongestStall)
		}()
	}
	if o.Library {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := runLibrary(ctx, o, logf)
			mu.Lock()
			defer mu.Unlock()
			rep.Stuck = append(rep.Stuck, r.Stuck...)
			rep.LongestStall = max(rep.LongestStall, r.LongestStall)
		}()
	}
	go func() { wg.Wait(); close(done) }()
rounds:
	for round := 0; round < o.Rounds; round++ {
		select {
		case <-done:
			break rounds // nothing left to fault
		case <-time.After(o.Every):
		}
		node, what, err := victim(admin, o, round)
		if err != nil {
			logf("round %d: %v", round+1, err)
			continue
		}
		logf("round %d: killing node %d (%s)", round+1, node, what)
		rep.Kills = append(rep.Kills, fmt.Sprintf("node %d (%s)", node, what))
		if err := o.Kill(node); err != nil {
			return rep, err
		}
		time.Sleep(o.Down)
		if err := o.Start(node); err != nil {
			return rep, err
		}
		logf("round %d: node %d is back", round+1, node)
	}
	<-done
	logf("loop ended: %s", rep.Line())
	return rep, check(admin, o, &rep)
}

// victim names the node to kill in round: by turns the transaction
// coordinator of partition 0's producer, the group's coordinator, and the
// leader of Out's partition 0.
func victim(c sarama.Client, o Options, round int) (int32, string, error) {
	var b *sarama.Broker
	var err error
	var what string
	switch round % 3 {
	case 0:
		what = "transaction coordinator of " + txnID(o, 0)
		if err = c.RefreshTransactionCoordinator(txnID(o, 0)); err == nil {
			b, err = c.TransactionCoordinator(txnID(o, 0))
		}
	case 1:
		what = "group coordinator"
		if err = c.RefreshCoordinator(o.Group); err == nil {
			b, err = c.Coordinator(o.Group)
		}
	default:
		what = "leader of " + o.Out + "/0"
		if err = c.RefreshMetadata(o.Out); err == nil {
			b, err = c.Leader(o.Out, 0)
		}
	}
	if err != nil {
		return 0, what, err
	}
	return b.ID(), what, nil
}

// libraryKey is the key of the input record at offset i of partition p in
// the library's runs: 16 keys per partition.
func libraryKey(p int32, i int64) string { return fmt.Sprintf("p%d-k%d", p, i%16) }

// txnID is the transactional id of input partition p's producer: the
// library's is TransactionalID (the group) - topic - partition.
func txnID(o Options, p int32) string {
	if o.Library {
		return fmt.Sprintf("%s-%s-%d", o.Group, o.In, p)
	}
	return fmt.Sprintf("%s-%d", o.Group, p)
}

func newClient(brokers []string, txn string) (sarama.Client, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.DialTimeout = 3 * time.Second
	cfg.Net.ReadTimeout = 10 * time.Second
	cfg.Net.WriteTimeout = 3 * time.Second
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Max = 20
	cfg.Producer.Retry.Backoff = 250 * time.Millisecond
	cfg.Net.MaxOpenRequests = 1
	if txn != "" {
		cfg.Producer.Transaction.ID = txn
		cfg.Producer.Transaction.Timeout = 20 * time.Second
		cfg.Producer.Transaction.Retry.Max = 40
		cfg.Producer.Transaction.Retry.Backoff = 250 * time.Millisecond
	}
	return sarama.NewClient(brokers, cfg)
}

func produceInput(c sarama.Client, o Options) error {
	p, err := sarama.NewSyncProducerFromClient(c)
	if err != nil {
		return err
	}
	defer p.Close()
	var batch []*sarama.ProducerMessage
	for part := int32(0); part < o.Partitions; part++ {
		for i := int64(0); i < o.PerPartition; i++ {
			m := &sarama.ProducerMessage{Topic: o.In, Partition: part, Value: sarama.StringEncoder(strconv.FormatInt(i, 10))}
			if o.Library {
				// keyed, so that the library's key order applies (records
				// without a key run at once)
				m.Key = sarama.StringEncoder(libraryKey(part, i))
			}
			batch = append(batch, m)
			if len(batch) == 1000 {
				if err := p.SendMessages(batch); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
	}
	if len(batch) > 0 {
		return p.SendMessages(batch)
	}
	return nil
}

// committed reads the group's committed offset of In's partition p with
// require_stable, which waits for a transaction's pending offsets: after a
// commit that failed, it says whether the transaction committed.
func committed(c sarama.Client, o Options, p int32) (int64, error) {
	if err := c.RefreshCoordinator(o.Group); err != nil {
		return 0, err
	}
	co, err := c.Coordinator(o.Group)
	if err != nil {
		return 0, err
	}
	req := sarama.NewOffsetFetchRequest(c.Config().Version, o.Group, map[string][]int32{o.In: {p}})
	req.RequireStable = true
	resp, err := co.FetchOffset(req)
	if err != nil {
		return 0, err
	}
	switch gerr := resp.GroupError(); gerr {
	case sarama.ErrNoError:
	case sarama.ErrGroupIDNotFound: // a group that committed nothing yet, to some brokers
		return 0, nil
	default:
		return 0, gerr
	}
	b := resp.GetBlock(o.In, p)
	if b == nil {
		return 0, errors.New("no answer for the partition")
	}
	if b.Err != sarama.ErrNoError {
		return 0, b.Err
	}
	return max(b.Offset, 0), nil
}

// check reads Out back under read_committed and the group's offsets. An
// output record's value is its input offset, in the same partition (the
// hand-written loop), or "partition/offset" in any (the library's).
func check(c sarama.Client, o Options, rep *Report) error {
	consumer, err := sarama.NewConsumerFromClient(c)
	if err != nil {
		return err
	}
	defer consumer.Close()
	outs, err := c.Partitions(o.Out)
	if err != nil {
		return err
	}
	seen := make([][]int32, o.Partitions)
	last := map[string]int64{} // by key (the library's), or input partition
	for p := range seen {
		seen[p] = make([]int32, o.PerPartition)
	}
	for _, p := range outs {
		end, err := c.GetOffset(o.Out, p, sarama.OffsetNewest)
		if err != nil {
			return err
		}
		if end == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition(o.Out, p, sarama.OffsetOldest)
		if err != nil {
			return err
		}
		for reading := true; reading; {
			select {
			case m := <-pc.Messages():
				in, src := int64(p), string(m.Value)
				if a, b, ok := strings.Cut(src, "/"); ok {
					in, _ = strconv.ParseInt(a, 10, 32)
					src = b
				}
				off, err := strconv.ParseInt(src, 10, 64)
				if err != nil || off < 0 || off >= o.PerPartition || in < 0 || in >= int64(o.Partitions) {
					pc.Close()
					return fmt.Errorf("%s/%d at %d: %q is no input record", o.Out, p, m.Offset, m.Value)
				}
				if seen[in][off] == 0 || !o.Periodic {
					k := string(m.Key)
					if !o.Library {
						k = strconv.FormatInt(in, 10)
					}
					if l, ok := last[k]; ok && off <= l {
						rep.OutOfOrder++
					}
					last[k] = off
				}
				seen[in][off]++
				reading = m.Offset+1 < end
			case <-time.After(3 * time.Second):
				reading = false // the rest are aborted records and markers: read_committed skips them
			}
		}
		pc.Close()
	}
	for p := int32(0); p < o.Partitions; p++ {
		for _, n := range seen[p] {
			switch {
			case n == 0:
				rep.Missing++
			case n > 1:
				rep.Duplicated += int64(n - 1)
			}
		}
		off, err := committed(c, o, p)
		if err != nil {
			return err
		}
		if off != o.PerPartition {
			rep.OffsetsWrong = append(rep.OffsetsWrong, fmt.Sprintf("%s/%d committed %d of %d", o.In, p, off, o.PerPartition))
		}
	}
	return nil
}

// Line is the report in one line.
func (r Report) Line() string {
	var b strings.Builder
	if r.Library {
		fmt.Fprintf(&b, "the library's %s mode; read back: %d missing, %d duplicated, %d out of order; longest stall %.1f s",
			map[bool]string{true: "periodic", false: "transactional"}[r.Periodic], r.Missing, r.Duplicated, r.OutOfOrder, r.LongestStall.Seconds())
		return b.String() + r.tail()
	}
	fmt.Fprintf(&b, "%d transactions committed (%d after their commit was called again, %d found committed after an error), %d aborted, %d producers replaced; read back: %d missing, %d duplicated, %d out of order; longest stall %.1f s",
		r.Transactions, r.CommitRetries, r.Ambiguous, r.Aborted, r.Fatal, r.Missing, r.Duplicated, r.OutOfOrder, r.LongestStall.Seconds())
	return b.String() + r.tail()
}

// tail is what Line adds for partitions that stopped or ended elsewhere.
func (r Report) tail() string {
	var b strings.Builder
	if len(r.Stuck) > 0 {
		fmt.Fprintf(&b, "; stuck: %s", strings.Join(r.Stuck, "; "))
	}
	if len(r.OffsetsWrong) > 0 {
		fmt.Fprintf(&b, "; offsets: %s", strings.Join(r.OffsetsWrong, "; "))
	}
	return b.String()
}

// Failed reports whether the probe saw what exactly-once forbids, or a
// partition that stopped.
func (r Report) Failed() bool {
	return r.Missing > 0 || (r.Duplicated > 0 && !r.Periodic) || r.OutOfOrder > 0 || len(r.OffsetsWrong) > 0 || len(r.Stuck) > 0
}
