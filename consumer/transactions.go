package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ledger"
)

// The transactional mode (CommitTransactional): each claim has a
// transactional producer of its own, its transactional id
// TransactionalIDPrefix-topic-partition, so a new owner of the partition
// fences the one before (its first use aborts or completes what the
// earlier owner left open). A record's results are written into the
// claim's open transaction once its Handle returns nil; the record then
// finishes, and the partition actor's marks (the watermark and the
// metadata of what finished above it) come here instead of to the
// session. Every CommitInterval the committer shuts the gate (no result
// enters the transaction while it commits), waits for the marks of the
// records whose results are in the transaction, adds the last mark to the
// transaction and commits it: a record's results become visible to
// read_committed readers together with the offsets that call it finished,
// or neither does.

// txnCoverWait bounds how long a commit waits for the marks of records
// whose results are in its transaction (they follow within the partition
// actor's mailbox turn; a record finished above a commit metadata cut to
// its size limit is not named until the watermark passes it).
const txnCoverWait = time.Second

// txnRetry bounds the wait between tries of a failed commit, and
// txnEndBudget how long a claim's last commit may keep trying.
var (
	txnRetry     = [2]time.Duration{100 * time.Millisecond, 2 * time.Second}
	txnEndBudget = 30 * time.Second
)

// txnAheadLimit bounds how long a transaction stays open for results whose
// records no mark names (a commit metadata cut to its size limit names
// them only once the watermark passes them): Kafka aborts a transaction
// open past its timeout (sarama's default: one minute).
var txnAheadLimit atomic.Int64 // a time.Duration; 10 s (tests shorten it)

func init() { txnAheadLimit.Store(int64(10 * time.Second)) }

// crashed, set by a test, stops every committer as a crash would: nothing
// more committed nor aborted, the open transactions left to the next
// owners.
var crashed atomic.Bool

// errTxnEnded fails a result written after its claim's transaction ended
// (a handler that outlived its drain): its record was not finished.
var errTxnEnded = errors.New("the claim has ended: results not written")

// txnProducer is a transactional producer and its client.
type txnProducer struct {
	client sarama.Client
	sarama.SyncProducer
}

func (p *txnProducer) close() {
	_ = p.SyncProducer.Close()
	_ = p.client.Close()
}

// transactions opens each claim's committer and routes records' results
// to their claim's.
type transactions struct {
	// open opens a transactional producer under the transactional id.
	open      func(id string) (*txnProducer, error)
	committed actors.CommittedReader
	group     string
	prefix    string
	interval  time.Duration
	deps      *actors.Dependencies
	logger    *slog.Logger

	mu     sync.Mutex
	claims map[txnPartition]*claimTxn
}

type txnPartition struct {
	topic     string
	partition int32
}

// transactionalID is the claim's transactional id.
func (t *transactions) transactionalID(topic string, partition int32) string {
	return t.prefix + "-" + topic + "-" + strconv.Itoa(int(partition))
}

// claimMarker opens the claim's producer (fencing an earlier owner's),
// begins its first transaction and starts its committer.
func (t *transactions) claimMarker(ctx context.Context, topic string, partition int32) (actors.ClaimMarker, error) {
	id := t.transactionalID(topic, partition)
	type opened struct {
		p   *txnProducer
		err error
	}
	ch := make(chan opened, 1)
	go func() { // sarama takes no context; a producer opened too late is closed
		p, err := t.open(id)
		ch <- opened{p, err}
	}()
	var p *txnProducer
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, fmt.Errorf("open the transactional producer %q: %w", id, o.err)
		}
		p = o.p
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.err == nil {
				o.p.close()
			}
		}()
		return nil, ctx.Err()
	}
	if err := p.BeginTxn(); err != nil {
		p.close()
		return nil, fmt.Errorf("begin a transaction of %q: %w", id, err)
	}
	c := &claimTxn{owner: t, topic: topic, partition: partition, id: id, producer: p, openedAt: time.Now(),
		marked: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		log: t.logger.With("topic", topic, "partition", partition, "transactional_id", id)}
	t.mu.Lock()
	t.claims[txnPartition{topic, partition}] = c
	t.mu.Unlock()
	go c.run()
	return c, nil
}

// produce writes r's results into its claim's open transaction.
func (t *transactions) produce(ctx context.Context, r *Record, msgs []*sarama.ProducerMessage, topics []string) error {
	t.mu.Lock()
	c := t.claims[txnPartition{r.Topic, r.Partition}]
	t.mu.Unlock()
	if c == nil {
		return errTxnEnded
	}
	start := time.Now()
	err := c.stage(ctx, r.Offset, msgs, topics)
	if err != nil && (ctx.Err() != nil || errors.Is(err, errTxnEnded)) {
		return err // not finished, and nothing said of the dependency
	}
	return sendOutcome(ctx, t.deps, time.Since(start), fmt.Sprintf("produce %d results in a transaction", len(msgs)), err)
}

// claimTxn is one claim's transactions: the actors.ClaimMarker its
// partition actor marks, and the transaction its records' results go into.
type claimTxn struct {
	owner     *transactions
	topic     string
	partition int32
	id        string
	log       *slog.Logger

	// gate: a result is written into the transaction under a read lock; a
	// commit holds it alone, so the transaction it commits takes no result
	// whose record it has not waited for.
	gate     sync.RWMutex
	producer *txnProducer // replaced, under the gate alone, after a fatal error

	mu        sync.Mutex
	mark      txnMark         // the partition actor's last mark
	committed txnMark         // the mark last committed; the committer's alone
	staged    []stagedResults // written into the open transaction
	carry     []stagedResults // to write into the next (taken out of an aborted one)
	// dirty: the transaction holds results no staged entry accounts for
	// (a write cut short, or a record whose wait ended before it): it is
	// aborted and the staged results written again before any commit.
	dirty  bool
	broken error // the producer was fenced: nothing more is committed
	closed bool
	// The committer's alone (under the gate): when the open transaction
	// began, and the mark added to it.
	openedAt time.Time
	txnMark  txnMark
	settling bool // a new producer: whether txnMark landed is not settled yet

	marked     chan struct{} // a mark came (capacity 1)
	stop, done chan struct{}
	known      knownTopics
}

// txnMark is a mark: the offset the partition resumes at and its metadata.
type txnMark struct {
	set    bool
	offset int64
	meta   string
}

// stagedResults are the results of the record at offset in the open
// transaction, kept to write again should it abort.
type stagedResults struct {
	offset int64
	msgs   []*sarama.ProducerMessage
}

// MarkOffset implements actors.OffsetMarker.
func (c *claimTxn) MarkOffset(_ string, _ int32, offset int64, metadata string) {
	c.setMark(offset, metadata)
}

// ResetOffset implements actors.OffsetMarker.
func (c *claimTxn) ResetOffset(_ string, _ int32, offset int64, metadata string) {
	c.setMark(offset, metadata)
}

func (c *claimTxn) setMark(offset int64, metadata string) {
	c.mu.Lock()
	if !c.mark.set || offset >= c.mark.offset {
		c.mark = txnMark{set: true, offset: offset, meta: metadata}
	}
	c.mu.Unlock()
	select {
	case c.marked <- struct{}{}:
	default:
	}
}

// stage writes a record's results into the open transaction and waits
// for their acknowledgement, or for ctx (the write then goes on, and the
// transaction is aborted before it commits).
func (c *claimTxn) stage(ctx context.Context, offset int64, msgs []*sarama.ProducerMessage, topics []string) error {
	done := make(chan error, 1)
	// Under mu: waiting, whether the record still waits (the write stages
	// its results only then); staged, whether the write staged them.
	var mu sync.Mutex
	waiting, staged := true, false
	go func() {
		c.gate.RLock()
		defer c.gate.RUnlock()
		c.mu.Lock()
		closed, broken := c.closed, c.broken
		c.mu.Unlock()
		switch {
		case closed:
			done <- errTxnEnded
			return
		case broken != nil:
			done <- broken
			return
		case c.producer == nil:
			done <- errors.New("the transactional producer is being opened again")
			return
		}
		if t, err := c.known.missing(c.producer.client, topics); err != nil {
			done <- fmt.Errorf("results topic %q: %w", t, err)
			return
		}
		err := c.producer.SendMessages(msgs)
		mu.Lock()
		defer mu.Unlock()
		c.mu.Lock()
		if err == nil && waiting {
			c.staged = append(c.staged, stagedResults{offset, msgs})
			staged = true
		} else {
			c.dirty = true // written in part, or for a record no longer waiting
		}
		c.mu.Unlock()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		if staged {
			return nil // staged as the wait ended: the record finishes
		}
		waiting = false
		return ctx.Err()
	}
}

func (c *claimTxn) run() {
	defer close(c.done)
	t := time.NewTicker(c.owner.interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if crashed.Load() {
				continue
			}
			c.gate.Lock()
			c.commit(false)
			c.gate.Unlock()
		}
	}
}

// End implements actors.ClaimMarker: the last commit, then the producer
// closes. What it cannot commit is aborted: the next owner runs it again.
func (c *claimTxn) End() {
	close(c.stop)
	<-c.done
	c.gate.Lock()
	if !crashed.Load() {
		c.commit(true)
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	if c.producer != nil {
		c.producer.close()
	}
	c.gate.Unlock()
	c.owner.mu.Lock()
	if c.owner.claims[txnPartition{c.topic, c.partition}] == c {
		delete(c.owner.claims, txnPartition{c.topic, c.partition})
	}
	c.owner.mu.Unlock()
}

// covered reports whether mark calls the record at offset finished.
func covered(mark txnMark, offset int64, finished *ledger.Resume) bool {
	if !mark.set {
		return false
	}
	if offset < mark.offset {
		return true
	}
	return finished != nil && finished.Finished(offset)
}

// commit is a round of the committer, the gate held: it commits the
// results the mark names, with the mark, and leaves a transaction open for
// the next round's results. It first waits (up to txnCoverWait) for the
// marks of the records whose results the open transaction holds.
//
// Results no mark names yet are never committed: when the open
// transaction also holds results the mark names (or the mark moved), it is
// aborted, and the named results are written again and committed with the
// mark in a transaction of their own, the others written again into the
// next one; when it holds only unnamed results, it stays open for the next
// round, for at most txnAheadLimit (Kafka aborts a transaction left open
// past its timeout), after which it is aborted and they are written again.
// At the end of the claim the unnamed results are dropped: their records
// were not marked, so the next owner runs them again.
//
// The producer's state drives each step, as sarama's recovery needs: a
// commit cut short is committed again (no transaction can begin before);
// an abortable error aborts, its results kept to be written again; a
// fatal one takes a new producer, and the group's committed offset says
// whether the last commit took effect. Failed steps are tried again with
// backoff until the round settles, the claim ends, or (final) txnEndBudget
// passes.
func (c *claimTxn) commit(final bool) {
	deadline := time.Now().Add(txnCoverWait)
	for !final {
		c.mu.Lock()
		mark, staged := c.mark, c.staged
		c.mu.Unlock()
		if _, ahead := split(mark, staged); len(ahead) == 0 || !time.Now().Before(deadline) {
			break
		}
		select {
		case <-c.marked:
		case <-time.After(time.Until(deadline)):
		}
	}
	began := time.Now()
	wait := txnRetry[0]
	for {
		err, done := c.step(final)
		if done {
			return
		}
		if err == nil {
			continue
		}
		if errors.Is(err, sarama.ErrProducerFenced) || errors.Is(err, sarama.ErrInvalidProducerEpoch) {
			c.fenced(err)
			return
		}
		if !c.retry(final, began, &wait, err) {
			return
		}
	}
}

// step takes the next step of a commit round: done when the round is over.
func (c *claimTxn) step(final bool) (err error, done bool) {
	c.mu.Lock()
	mark, staged, dirty, broken := c.mark, c.staged, c.dirty, c.broken
	c.mu.Unlock()
	if broken != nil {
		return nil, true
	}
	if c.producer == nil {
		return c.replaceProducer(), false
	}
	if c.settling {
		return c.settle(), false
	}
	status := c.producer.TxnStatus()
	inTxn := status&sarama.ProducerTxnFlagInTransaction != 0
	moved := mark.set && mark != c.committed
	switch {
	case status&sarama.ProducerTxnFlagFatalError != 0,
		status&(sarama.ProducerTxnFlagInitializing|sarama.ProducerTxnFlagUninitialized) != 0:
		// Initializing: an epoch bump after an ended transaction failed
		// (BeginTxn is refused until it succeeds); whether the ended one was
		// a landed commit is settled by the group's committed offset.
		return c.replaceProducer(), false
	case status&sarama.ProducerTxnFlagCommittingTransaction != 0:
		if err := c.producer.CommitTxn(); err != nil {
			return fmt.Errorf("commit again: %w", err), false
		}
		c.committed = c.txnMark
		c.setStaged(nil)
		return nil, false
	case status&(sarama.ProducerTxnFlagAbortableError|sarama.ProducerTxnFlagAbortingTransaction) != 0,
		inTxn && (dirty || (final && hasAhead(mark, staged))):
		return c.abort(), false
	case inTxn:
		named, ahead := split(mark, staged)
		switch {
		case len(ahead) == 0 && (moved || len(staged) > 0):
			return c.commitOpen(mark), false
		case len(ahead) == 0:
			return nil, true // nothing new
		case !final && len(named) == 0 && !moved && time.Since(c.openedAt) < time.Duration(txnAheadLimit.Load()):
			return nil, true // only results whose marks have not come: the transaction waits for them
		}
		return c.abort(), false // commit the named ones apart, then open with the others
	}
	// No transaction open: commit what the mark names of the results
	// carried over (or the mark alone), then open the next one with the
	// rest, or (final) drop them.
	c.mu.Lock()
	carry := c.carry
	c.mu.Unlock()
	named, ahead := split(mark, carry)
	if len(named) > 0 || moved {
		if err := c.begin(named, ahead); err != nil {
			return err, false
		}
		return c.commitOpen(mark), false
	}
	if final {
		if len(ahead) > 0 {
			c.log.Warn("the claim ended with results of records not marked finished; dropped, the next owner runs them again", "records", len(ahead))
		}
		c.mu.Lock()
		c.carry = nil
		c.mu.Unlock()
		return nil, true
	}
	if err := c.begin(ahead, nil); err != nil {
		return err, false
	}
	return nil, true
}

// split parts staged into the results mark names finished and the others.
func split(mark txnMark, staged []stagedResults) (named, ahead []stagedResults) {
	var finished *ledger.Resume
	if mark.set && mark.meta != "" {
		if r, err := ledger.DecodeMetadata(mark.meta); err == nil {
			finished = &r
		}
	}
	for _, s := range staged {
		if covered(mark, s.offset, finished) {
			named = append(named, s)
		} else {
			ahead = append(ahead, s)
		}
	}
	return named, ahead
}

func hasAhead(mark txnMark, staged []stagedResults) bool {
	_, ahead := split(mark, staged)
	return len(ahead) > 0
}

func (c *claimTxn) setStaged(s []stagedResults) {
	c.mu.Lock()
	c.staged, c.dirty = s, false
	c.mu.Unlock()
}

func (c *claimTxn) setDirty() {
	c.mu.Lock()
	c.dirty = true
	c.mu.Unlock()
}

// begin begins a transaction and writes write into it; carry stays in
// memory for the next one.
func (c *claimTxn) begin(write, carry []stagedResults) error {
	if err := c.producer.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	c.openedAt = time.Now()
	c.txnMark = txnMark{}
	c.mu.Lock()
	c.staged, c.carry, c.dirty = write, carry, false
	c.mu.Unlock()
	var msgs []*sarama.ProducerMessage
	for _, s := range write {
		msgs = append(msgs, s.msgs...)
	}
	if len(msgs) > 0 {
		if err := c.producer.SendMessages(msgs); err != nil {
			c.setDirty() // written in part: aborted, and written again
			return fmt.Errorf("write results again: %w", err)
		}
	}
	return nil
}

// commitOpen adds mark to the open transaction and commits it.
func (c *claimTxn) commitOpen(mark txnMark) error {
	if mark.set && mark != c.txnMark {
		offsets := map[string][]*sarama.PartitionOffsetMetadata{c.topic: {{Partition: c.partition, Offset: mark.offset, Metadata: &mark.meta}}}
		if err := c.producer.AddOffsetsToTxn(offsets, c.owner.group); err != nil {
			return fmt.Errorf("add offsets: %w", err)
		}
		c.txnMark = mark
	}
	if err := c.producer.CommitTxn(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	c.committed = c.txnMark
	c.setStaged(nil)
	return nil
}

// abort aborts the open transaction; its results are carried to the next.
func (c *claimTxn) abort() error {
	if err := c.producer.AbortTxn(); err != nil {
		return fmt.Errorf("abort: %w", err)
	}
	c.mu.Lock()
	c.carry, c.staged, c.dirty = append(c.staged, c.carry...), nil, false
	c.mu.Unlock()
	c.txnMark = txnMark{}
	return nil
}

// status is the producer's transaction state, for the log.
func (c *claimTxn) status() string {
	if c.producer == nil {
		return "no producer"
	}
	return c.producer.TxnStatus().String()
}

// fenced stops the claim's commits: another owner's producer took over
// the transactional id.
func (c *claimTxn) fenced(err error) {
	c.mu.Lock()
	c.broken = fmt.Errorf("fenced by a newer owner of the partition: %w", err)
	c.mu.Unlock()
	c.log.Warn("the transactional producer was fenced: this claim commits nothing more", "error", err)
}

// replaceProducer opens a new producer under the same id (which aborts
// what the old one left open) and settles, by the group's committed
// offset, whether the commit of the open transaction's mark took effect
// before the error: its results are then committed, else carried to the
// next transaction.
func (c *claimTxn) replaceProducer() error {
	if c.producer != nil {
		c.producer.close()
		c.producer = nil
	}
	p, err := c.owner.open(c.id)
	if err != nil {
		return fmt.Errorf("open a new transactional producer: %w", err)
	}
	c.producer = p
	c.settling = true
	return c.settle()
}

// settle decides, from the group's committed offset, whether the open
// transaction's commit landed; a failed read decides nothing (tried again).
func (c *claimTxn) settle() error {
	landed := false
	if m := c.txnMark; m.set && m != c.committed {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := c.owner.committed(ctx, c.topic, c.partition)
		cancel()
		if err != nil {
			return fmt.Errorf("read the committed offset, to settle whether the last commit landed: %w", err)
		}
		landed = got.Offset == m.offset && got.Metadata == m.meta
	}
	c.settling = false
	c.mu.Lock()
	if landed {
		c.committed, c.staged = c.txnMark, nil
	} else {
		c.carry, c.staged = append(c.staged, c.carry...), nil
	}
	c.dirty = false
	c.mu.Unlock()
	c.txnMark = txnMark{}
	return nil
}

// retry waits before the next try of a failed step, false when it gives
// up: the claim is ending (final: after txnEndBudget) or was fenced.
func (c *claimTxn) retry(final bool, began time.Time, wait *time.Duration, err error) bool {
	c.mu.Lock()
	broken := c.broken
	c.mu.Unlock()
	if broken != nil {
		return false
	}
	if final && time.Since(began) > txnEndBudget {
		c.log.Error("the claim's last transaction did not commit; the next owner runs its records again", "error", err)
		return false
	}
	c.log.Warn("transaction step failed; trying again", "error", err, "status", c.status(), "retry_in", *wait)
	if final {
		time.Sleep(*wait) // End closed stop: only the budget ends the tries
	} else {
		select {
		case <-time.After(*wait):
		case <-c.stop:
			return false // End commits what is left
		}
	}
	*wait = min(2**wait, txnRetry[1])
	return true
}
