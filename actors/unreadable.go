package actors

// Unreadable batches: getting a claim past record batches its consumer
// cannot decode.
//
// sarama decodes a whole fetch response before it hands anything over, and
// with sarama.MaxDecompressedBatchSize set, a batch that decompresses past
// it fails that decoding (overLimit): the broker consumer drops the
// connection and every partition it fetches for reports the error and
// fetches again, from the same offsets, forever. The error does not say
// which partition holds the batch. So, for each claim that reports it, the
// bridge (watchUnreadable):
//
//  1. pauses the claim's partition consumer, so that the fetches of the
//     other partitions led by the same broker go through again;
//  2. takes everything sarama had delivered for it (readAhead.position):
//     the consumer's position is one past the last record taken;
//  3. reads the partition from there with a client of its own, as the
//     consumer would (walkUnreadable, through a PartitionReader): when no
//     batch within the consumer's fetch window fails, the claim was only
//     sharing the broker with the partition that holds one, and resumes;
//  4. otherwise reads one batch per fetch: the records of readable batches
//     go to the partition actor like any record (sarama could not deliver
//     them: they came in the failing fetch), and each offset no fetch can
//     read goes as an unreadable offset, which the partition actor
//     dead-letters at once, by offset, without key or value;
//  5. once the window where the reading stopped is clean, waits until every
//     record and offset it admitted has finished (the watermark is past
//     them: nothing is committed past an unfinished record) and ends the
//     claim: sarama then ends the member's session, commits, and the next
//     session's consumer starts at the committed offset, past the batch.
//
// What is skipped is only ever unreadable: an offset is dead-lettered only
// when a fetch at it failed, and a fetch at x fails exactly when the first
// batch whose last offset is x or more is over the limit. So a
// dead-lettered offset lies in a batch over the limit, or in a gap (offsets
// without records, after compaction) just before one; a readable batch
// between two unreadable ones is read, since the offsets are tried one by
// one. Trying each offset costs a fetch per dead letter: a batch of a
// million offsets is a million fetches (and dead letters), but a bisection
// could step over a readable batch wedged between two unreadable ones, and
// that batch's records would be dead-lettered unread.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/IBM/sarama"
	"github.com/klauspost/compress/zstd"
)

// overLimit reports whether err says a batch decompresses past
// sarama.MaxDecompressedBatchSize: sarama's ErrDecompressedBatchTooLarge,
// or zstd's ErrWindowSizeExceeded, which sarama passes on as it is when a
// zstd frame declares a window larger than the limit (it caps the
// decoder's memory, window included, at the limit, and refuses such a
// frame before decoding any of it).
func overLimit(err error) bool {
	return errors.Is(err, sarama.ErrDecompressedBatchTooLarge) || errors.Is(err, zstd.ErrWindowSizeExceeded)
}

// UnreadableConfig is how a Bridge gets a claim past record batches its
// consumer cannot decode (overLimit).
type UnreadableConfig struct {
	// Read reads a partition as the group's consumers do, on a client of
	// its own (NewPartitionReader).
	Read PartitionReader
	// Window is the bytes of a partition one fetch of the group's
	// consumers asks for (their Consumer.Fetch.Default).
	Window int32
	// Limit is sarama.MaxDecompressedBatchSize as the process set it, for
	// the logs and the dead letters.
	Limit int
}

// ReadBatch is one complete record batch a fetch returned: its offsets, and
// the records of it a consumer is given (none for a control batch or a
// batch of an aborted transaction read with read_committed).
type ReadBatch struct {
	First, Last int64
	Records     []*sarama.ConsumerMessage
}

// PartitionReader fetches a partition at offset, asking for maxBytes of it,
// and returns the complete batches of the answer in order, as a consumer
// with the reader's isolation level would read them. An offset below the
// log's start reads from the start. A batch of the answer that
// decompresses past sarama.MaxDecompressedBatchSize fails the whole read
// with an error overLimit recognises; one the reader cannot read for
// another lasting reason wraps errCannotRead. No
// batch at all: the partition holds nothing readable at offset or after
// (the end of the log, or the last stable offset).
type PartitionReader func(topic string, partition int32, offset int64, maxBytes int32) ([]ReadBatch, error)

// errCannotRead marks a read that trying again will not mend.
var errCannotRead = errors.New("cannot read the partition")

// NewPartitionReader returns a PartitionReader that sends one fetch to the
// partition's leader through client, without waiting for data, with the
// client's isolation level. A fetch that fails to decode leaves the
// client's connection open, unlike a consumer's. It may share the client
// with the settle probe; never give it a group member's.
func NewPartitionReader(client sarama.Client) PartitionReader {
	cfg := client.Config()
	isolation := cfg.Consumer.IsolationLevel
	// Version 10 reads zstd batches (a broker refuses to return them to
	// older fetches); 4 carries the isolation level.
	version := int16(4)
	if cfg.Version.IsAtLeast(sarama.V2_1_0_0) {
		version = 10
	}
	fetch := func(topic string, partition int32, offset int64, maxBytes int32) (*sarama.FetchResponseBlock, error) {
		leader, err := client.Leader(topic, partition)
		if err != nil {
			_ = client.RefreshMetadata(topic)
			return nil, fmt.Errorf("leader of %s/%d: %w", topic, partition, err)
		}
		req := &sarama.FetchRequest{Version: version, MaxWaitTime: 0, MinBytes: 1, MaxBytes: maxBytes, Isolation: isolation,
			SessionID: 0, SessionEpoch: -1} // no fetch session
		req.AddBlock(topic, partition, offset, maxBytes, -1)
		resp, err := leader.Fetch(req)
		if err != nil {
			return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, err)
		}
		block := resp.GetBlock(topic, partition)
		if block == nil {
			return nil, fmt.Errorf("fetch %s/%d at %d: no answer for the partition", topic, partition, offset)
		}
		if block.Err != sarama.ErrNoError {
			if errors.Is(block.Err, sarama.ErrNotLeaderForPartition) || errors.Is(block.Err, sarama.ErrUnknownTopicOrPartition) {
				_ = client.RefreshMetadata(topic)
			}
			return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, block.Err)
		}
		return block, nil
	}
	return func(topic string, partition int32, offset int64, maxBytes int32) ([]ReadBatch, error) {
		block, err := fetch(topic, partition, offset, maxBytes)
		if errors.Is(err, sarama.ErrOffsetOutOfRange) {
			start, serr := client.GetOffset(topic, partition, sarama.OffsetOldest)
			if serr != nil || offset >= start {
				return nil, err // past the end, which is not the reader's to judge
			}
			block, err = fetch(topic, partition, start, maxBytes)
		}
		if err != nil {
			return nil, err
		}
		return readBatches(block, topic, partition, isolation)
	}
}

// readBatches returns block's complete batches with the records a consumer
// of isolation is given, as sarama's partition consumer picks them: control
// batches give none (an abort marker ends its producer's aborted
// transaction), nor, read_committed, does a transactional batch of a
// producer inside an aborted transaction the answer lists.
func readBatches(block *sarama.FetchResponseBlock, topic string, partition int32, isolation sarama.IsolationLevel) ([]ReadBatch, error) {
	pending := slices.SortedFunc(slices.Values(block.AbortedTransactions), func(a, b *sarama.AbortedTransaction) int {
		return cmp.Compare(a.FirstOffset, b.FirstOffset)
	})
	aborted := map[int64]bool{}
	var out []ReadBatch
	for i, set := range block.RecordsSet {
		if set.MsgSet != nil {
			return nil, fmt.Errorf("%w: %s/%d holds a message set of the format before 0.11 (magic 0 or 1), which this reader does not read", errCannotRead, topic, partition)
		}
		b := set.RecordBatch
		if b == nil {
			continue
		}
		if b.PartialTrailingRecord {
			if i == 0 {
				return nil, fmt.Errorf("%w: the broker returned only part of the batch at %d of %s/%d (a broker before 0.10.1 cuts a batch at the fetch's size)", errCannotRead, b.FirstOffset, topic, partition)
			}
			break
		}
		for len(pending) > 0 && pending[0].FirstOffset <= b.LastOffset() {
			aborted[pending[0].ProducerID] = true
			pending = pending[1:]
		}
		rb := ReadBatch{First: b.FirstOffset, Last: b.LastOffset()}
		switch {
		case b.Control:
			if isAbortMarker(b) {
				delete(aborted, b.ProducerID)
			}
		case isolation == sarama.ReadCommitted && b.IsTransactional && aborted[b.ProducerID]:
		default:
			rb.Records = make([]*sarama.ConsumerMessage, 0, len(b.Records))
			for _, r := range b.Records {
				ts := b.FirstTimestamp.Add(r.TimestampDelta)
				if b.LogAppendTime {
					ts = b.MaxTimestamp
				}
				rb.Records = append(rb.Records, &sarama.ConsumerMessage{Topic: topic, Partition: partition, Key: r.Key, Value: r.Value,
					Offset: b.FirstOffset + r.OffsetDelta, Timestamp: ts, Headers: r.Headers})
			}
		}
		out = append(out, rb)
	}
	return out, nil
}

// isAbortMarker reports whether control batch b is a transaction's abort
// marker: its record's key is a version (int16) and a type (int16), 0 for
// abort, 1 for commit.
func isAbortMarker(b *sarama.RecordBatch) bool {
	if len(b.Records) == 0 || len(b.Records[0].Key) < 4 {
		return false
	}
	k := b.Records[0].Key
	return k[2] == 0 && k[3] == 0
}

// unreadableItem is what the walk hands the bridge, in offset order: a
// record to admit, or an offset no fetch can read; or, last, done: the
// claim should restart past what it was handed.
type unreadableItem struct {
	record *sarama.ConsumerMessage // nil for an unreadable offset
	offset int64
	done   bool
}

// walkOutcome is how a walk ended.
type walkOutcome int

const (
	// walkClean: no batch within the consumer's window from its position
	// fails; the claim's fetch failed for another partition's batch.
	walkClean walkOutcome = iota
	// walkPast: the walk handed over records and unreadable offsets up to
	// next (excluded), where the consumer's window is clean, or where the
	// partition holds nothing readable any more.
	walkPast
	// walkStopped: emit refused an item (the claim ended).
	walkStopped
)

// fineRecheck is how many readable batches the walk reads one by one
// before it asks again whether the window where it stands is clean, in
// case the batch that failed the first window is gone (retention); it
// doubles after each check, so a long way to the failing batch costs few
// window fetches.
const fineRecheck = 64

// walkUnreadable reads a partition from pos, the consumer's position (one
// past the last offset sarama delivered), through read, with window the
// consumer's fetch size, and hands emit what the consumer could not deliver.
//
// First it finds whether the consumer's own fetch fails: the consumer's
// next offset lies between pos and its first deliverable record (it would
// have delivered that record otherwise), so the walk steps over batches
// without one, and a window fetched at the batch holding the first
// deliverable record covers the consumer's window (an earlier start only
// shortens it). Clean: walkClean, nothing emitted.
//
// Otherwise it reads one batch per fetch from where the failing window
// began: a readable batch's records (from pos on) are emitted, an offset
// whose fetch fails is emitted as unreadable and the next offset tried.
// After a run of unreadable offsets (and every fineRecheck readable
// batches, doubling) it fetches the window where it stands: clean, it
// returns walkPast with next there. It also returns walkPast when the
// partition holds nothing more to read. Errors other than the unreadable
// batch's end the walk; read retries what is worth retrying. Each fetch
// moves the walk forward (a batch, or an offset), so it ends at the log's
// end at the latest.
func walkUnreadable(pos int64, window int32, read func(offset int64, maxBytes int32) ([]ReadBatch, error), emit func(unreadableItem) bool) (walkOutcome, int64, error) {
	x := pos
	for {
		batches, err := read(x, window)
		if overLimit(err) {
			break
		}
		if err != nil {
			return 0, 0, err
		}
		d := slices.IndexFunc(batches, func(b ReadBatch) bool {
			return slices.ContainsFunc(b.Records, func(m *sarama.ConsumerMessage) bool { return m.Offset >= pos })
		})
		switch {
		case len(batches) == 0 || d == 0:
			return walkClean, 0, nil
		case d > 0:
			x = batches[d].First
		default:
			x = batches[len(batches)-1].Last + 1
		}
	}
	inRun := false // the last fetch failed: x follows an unreadable offset
	recheck, read1 := fineRecheck, 0
	for {
		batches, err := read(x, 1)
		if overLimit(err) {
			if !emit(unreadableItem{offset: x}) {
				return walkStopped, 0, nil
			}
			x++
			inRun = true
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		if len(batches) == 0 {
			return walkPast, x, nil
		}
		if inRun || read1 >= recheck {
			if !inRun {
				recheck *= 2
			}
			inRun, read1 = false, 0
			_, err := read(x, window)
			if err == nil {
				return walkPast, x, nil
			}
			if !overLimit(err) {
				return 0, 0, err
			}
		}
		b := batches[0]
		if b.Last < x {
			return 0, 0, fmt.Errorf("%w: a fetch at %d returned a batch ending at %d", errCannotRead, x, b.Last)
		}
		for _, m := range b.Records {
			if m.Offset >= x && !emit(unreadableItem{record: m, offset: m.Offset}) {
				return walkStopped, 0, nil
			}
		}
		x = b.Last + 1
		read1++
	}
}

// unreadableState is a claim's part in getting past unreadable batches.
type unreadableState struct {
	// signal is set when the claim's fetch failed on a batch over the
	// decompression limit.
	signal chan struct{}
	// items carries the walk's records and unreadable offsets to feed,
	// then a done item: the claim should restart past them.
	items chan unreadableItem
}

func newUnreadableState() *unreadableState {
	return &unreadableState{signal: make(chan struct{}, 1), items: make(chan unreadableItem)}
}

// unreadableBatch tells the claim its fetch failed on a batch over the
// decompression limit. It never blocks.
func (u *unreadableState) unreadableBatch() {
	if u == nil {
		return
	}
	select {
	case u.signal <- struct{}{}:
	default:
	}
}

// pausable is sarama's claim: its partition consumer can stop fetching.
type pausable interface {
	Pause()
	Resume()
}

// Retries of the walk's reads: what bounds them is the claim (they stop
// when it ends); the wait between them doubles up to unreadableRetryMax,
// and a warning is logged at the first failure and then at most every
// unreadableLogEvery.
const (
	unreadableRetryMin = 100 * time.Millisecond
	unreadableRetryMax = 5 * time.Second
	unreadableLogEvery = 30 * time.Second
)

// maxWindowGrowth bounds how far the walk's window grows for a claim whose
// fetches keep failing while the walk finds its window clean: sarama grows
// a partition's fetch size past Consumer.Fetch.Default for a batch larger
// than it that a response cut short.
const maxWindowGrowth = 4

// watchUnreadable runs for the life of a claim (until ctx is done or the
// claim ended): at each signal it pauses the claim, finds where its
// consumer stands and walks the partition from there (walkUnreadable),
// handing feed what it must admit. A clean walk resumes the claim; a walk
// that handed over unreadable offsets ends with a closing item and leaves
// the claim paused: feed restarts it. A walk that cannot read the
// partition (errCannotRead) says so at error level and stops watching:
// it resumes the claim when it had handed nothing over (the claim may not
// hold the batch; sarama keeps failing as before), and leaves it paused
// otherwise (it does hold one: paused, it no longer fails the other
// partitions' fetches). It never admits anything itself.
func (b *Bridge) watchUnreadable(ctx context.Context, claim sarama.ConsumerGroupClaim, p pausable, e *claimEntry, ended <-chan struct{}, log *slog.Logger) {
	u := b.cfg.Unreadable
	window := max(u.Window, 1)
	for {
		select {
		case <-e.unreadable.signal:
		case <-ctx.Done():
			return
		case <-ended:
			return
		}
		p.Pause()
		pos, ok := e.ahead.position(ctx)
		if !ok {
			return
		}
		if pos < 0 {
			// Nothing taken yet: the consumer began at the committed offset
			// or, with none, at the log's start (NewConsumerConfig:
			// OffsetOldest), which a read below it reaches.
			pos = max(claim.InitialOffset(), 0)
		}
		outcome, next, emitted, err := b.walkClaim(ctx, e, pos, window, ended, log)
		if outcome == walkPast && emitted == 0 {
			// The window failed, yet a fetch there finds nothing to read:
			// the log changed under the walk. Nothing to restart past.
			outcome = walkClean
		}
		switch {
		case err != nil:
			if ctx.Err() != nil || isClosed(ended) {
				return
			}
			if emitted == 0 {
				p.Resume()
				log.Error("a fetch of this partition failed on a record batch over the decompression limit, and the partition cannot be read to find out whether the batch is its own; it is left to its consumer, whose fetches will keep failing if it is",
					"position", pos, "limit", u.Limit, "error", err)
				return
			}
			log.Error("this partition holds a record batch over the decompression limit and cannot be read past it: it stays paused (stuck), so that the other partitions of its broker are fetched",
				"position", pos, "limit", u.Limit, "error", err)
			return
		case outcome == walkStopped:
			return
		case outcome == walkClean:
			p.Resume()
			if window < maxWindowGrowth*max(u.Window, 1) {
				window *= 2
			}
			log.Info("a fetch failed on a record batch over the decompression limit of another partition led by the same broker; this one resumes",
				"position", pos, "limit", u.Limit)
			continue
		}
		select {
		case e.unreadable.items <- unreadableItem{done: true}:
			log.Info("unreadable offsets handed over; the claim restarts once they are dead-lettered", "next", next)
		case <-ctx.Done():
		case <-ended:
		}
		return
	}
}

// walkClaim walks the claim's partition from pos, retrying reads that fail
// for a passing reason while the claim lasts, and logging each run of
// unreadable offsets as it ends.
func (b *Bridge) walkClaim(ctx context.Context, e *claimEntry, pos int64, window int32, ended <-chan struct{}, log *slog.Logger) (outcome walkOutcome, next int64, emitted int, err error) {
	u := b.cfg.Unreadable
	read := func(offset int64, maxBytes int32) ([]ReadBatch, error) {
		wait := unreadableRetryMin
		var failing time.Time
		var logged time.Time
		for {
			if ctx.Err() != nil || isClosed(ended) {
				return nil, fmt.Errorf("%w: the claim ended", errCannotRead)
			}
			batches, err := u.Read(e.topic, e.partition, offset, maxBytes)
			if err == nil || overLimit(err) || errors.Is(err, errCannotRead) {
				return batches, err
			}
			now := time.Now()
			if failing.IsZero() {
				failing = now
			}
			if now.Sub(logged) >= unreadableLogEvery {
				logged = now
				log.Warn("reading the partition past a batch over the decompression limit failed; retrying while the claim lasts",
					"offset", offset, "failing_for", now.Sub(failing).Round(time.Millisecond).String(), "error", err)
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			case <-ended:
			}
			wait = min(2*wait, unreadableRetryMax)
		}
	}
	var runFirst, runLast int64 = -1, -1
	flush := func() {
		if runFirst < 0 {
			return
		}
		log.Error("record batch over the decompression limit: no fetch can read these offsets; each is dead-lettered without key or value, and the partition goes on past them",
			"first_offset", runFirst, "last_offset", runLast, "offsets", runLast-runFirst+1, "limit", u.Limit)
		runFirst, runLast = -1, -1
	}
	emit := func(it unreadableItem) bool {
		if it.record == nil {
			if runFirst >= 0 && it.offset == runLast+1 {
				runLast = it.offset
			} else {
				flush()
				runFirst, runLast = it.offset, it.offset
			}
		} else {
			flush()
		}
		select {
		case e.unreadable.items <- it:
			emitted++
			return true
		case <-ctx.Done():
			return false
		case <-ended:
			return false
		}
	}
	outcome, next, err = walkUnreadable(pos, window, read, emit)
	flush()
	return outcome, next, emitted, err
}
