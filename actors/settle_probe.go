package actors

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/IBM/sarama"
)

// SettleProbe asks the broker whether a claim has consumed everything there
// is: whether a fetch at position, with the consumer's isolation level,
// returns nothing deliverable, no open transaction holds records back, and
// the leader's high watermark has reached highWatermark, the end the caller
// was told of, or its log ends below it (truncated: those records are gone).
// The bridge calls it for a claim that has been idle for IdleSettle with
// offsets left below the high watermark; only a positive answer makes the
// claim Settled (its lag read as none). An error is a negative answer.
type SettleProbe func(topic string, partition int32, position, highWatermark int64) (settled bool, err error)

// NewFetchProbe returns a SettleProbe that sends one fetch to the
// partition's leader through client, without waiting for data (and, when
// position is below the log's start, asks for the start and fetches there
// once more; when the leader's high watermark is behind the caller's,
// fetches at the caller's to tell a lagging leader from a truncated log).
func NewFetchProbe(client sarama.Client, isolation sarama.IsolationLevel) SettleProbe {
	return func(topic string, partition int32, position, highWatermark int64) (bool, error) {
		leader, err := client.Leader(topic, partition)
		if err != nil {
			return false, fmt.Errorf("leader of %s/%d: %w", topic, partition, err)
		}
		block, err := fetchBlock(leader, topic, partition, position, isolation)
		if errors.Is(err, sarama.ErrOffsetOutOfRange) {
			// Retention deleted the records below the log's start since the
			// group's commit (or the claim began at the oldest offset, which
			// the position reads as 0): the consumer starts at the log's
			// start, so the probe asks there.
			start, serr := client.GetOffset(topic, partition, sarama.OffsetOldest)
			if serr != nil {
				return false, fmt.Errorf("log start of %s/%d: %w", topic, partition, serr)
			}
			if position >= start {
				return false, err // past the end (a truncated log), which the probe does not judge
			}
			position = start
			block, err = fetchBlock(leader, topic, partition, position, isolation)
		}
		if err != nil {
			return false, err
		}
		if block.HighWaterMarkOffset < highWatermark {
			// The leader's high watermark is behind the one the caller was
			// told of. A new leader catching up has the records below it
			// (its log reaches there; only its high watermark lags), and the
			// fetch answers none until it has caught up: records wait. But
			// an unclean election can have truncated the log below it, and
			// those records never come (sarama keeps a claim's high
			// watermark from the last fetch that returned records, so a
			// claim at the new end would lag for ever): a fetch at
			// highWatermark, past the log's end, is then out of range, and
			// what the log holds is judged as it is.
			if _, err := fetchBlock(leader, topic, partition, highWatermark, isolation); !errors.Is(err, sarama.ErrOffsetOutOfRange) {
				return false, nil
			}
		}
		if isolation == sarama.ReadCommitted && block.LastStableOffset >= 0 && block.LastStableOffset < block.HighWaterMarkOffset {
			return false, nil // an open transaction holds the rest back: records wait
		}
		return !deliverable(block, position), nil
	}
}

// fetchBlock sends one fetch at position, without waiting for data, and
// returns the partition's answer; its error code as an error.
func fetchBlock(leader *sarama.Broker, topic string, partition int32, position int64, isolation sarama.IsolationLevel) (*sarama.FetchResponseBlock, error) {
	req := &sarama.FetchRequest{Version: 4, MaxWaitTime: 0, MinBytes: 1, MaxBytes: 1 << 20, Isolation: isolation}
	req.AddBlock(topic, partition, position, 1<<20, -1)
	resp, err := leader.Fetch(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, position, err)
	}
	block := resp.GetBlock(topic, partition)
	if block == nil {
		return nil, fmt.Errorf("fetch %s/%d at %d: no answer for the partition", topic, partition, position)
	}
	if block.Err != sarama.ErrNoError {
		return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, position, block.Err)
	}
	return block, nil
}

// deliverable reports whether block holds a record at or after position that
// a consumer would be given: not a control record (a transaction marker), not
// a record of an aborted transaction, and not cut off at the end of the
// response (which cannot be judged, so counts as deliverable).
//
// Aborted transactions are followed as the Kafka consumer does: a producer's
// transaction is aborted from the first offset the response lists for it up
// to that producer's next control batch (its abort marker).
func deliverable(block *sarama.FetchResponseBlock, position int64) bool {
	aborted := map[int64]bool{} // producers inside an aborted transaction
	pending := slices.SortedFunc(slices.Values(block.AbortedTransactions), func(a, b *sarama.AbortedTransaction) int {
		return cmp.Compare(a.FirstOffset, b.FirstOffset)
	})
	for _, set := range block.RecordsSet {
		if set.MsgSet != nil {
			for _, m := range set.MsgSet.Messages {
				if m.Offset >= position {
					return true
				}
			}
			continue
		}
		b := set.RecordBatch
		if b == nil {
			continue
		}
		if b.PartialTrailingRecord {
			return true
		}
		for len(pending) > 0 && pending[0].FirstOffset <= b.FirstOffset {
			aborted[pending[0].ProducerID] = true
			pending = pending[1:]
		}
		if b.Control {
			delete(aborted, b.ProducerID) // its marker ends the transaction
			continue
		}
		if b.IsTransactional && aborted[b.ProducerID] {
			continue
		}
		for _, r := range b.Records {
			if b.FirstOffset+r.OffsetDelta >= position {
				return true
			}
		}
	}
	return false
}
