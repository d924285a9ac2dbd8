package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors/ledger"
	"github.com/patchflow/patchflow/messages"
)

// Committed is what a group committed for a partition, and where the
// partition ended when it was read.
type Committed struct {
	Offset   int64 // negative when the group committed none
	Metadata string
	// End is the partition's end offset (its high watermark): no finished
	// offset can lie at or past it.
	End int64
	// Last is the record the log holds now at the last offset the metadata
	// speaks of, to check it against the metadata's tail, and First the one
	// at the metadata's first, to check against its lead; nil when the log
	// holds none there, or the metadata is not ours, names no fingerprint
	// for them, or was not read.
	Last, First *messages.Record
}

// CommittedReader returns what the group committed for a partition. It
// returns by ctx's deadline.
type CommittedReader func(ctx context.Context, topic string, partition int32) (Committed, error)

// resumeReadTimeout bounds the read of the committed metadata as a claim
// starts; past it the claim starts without it (and replays).
const resumeReadTimeout = 5 * time.Second

// NewCommittedReader returns a CommittedReader that asks the group's
// coordinator through client (a stable OffsetFetch: fetchCommitted), then
// the partition's leader for its end offset and, when the metadata is ours,
// names both fingerprints and speaks of offsets below the end, for the
// records at the last of them and at its first (a fetch each, one when
// they are the same offset, with the client's isolation level). A read that outlives ctx is left to finish in
// the background, bounded by the client's network timeouts.
func NewCommittedReader(client sarama.Client, group string) CommittedReader {
	isolation := client.Config().Consumer.IsolationLevel
	fetch := func(ctx context.Context, topic string, partition int32) (Committed, error) {
		resp, err := fetchCommitted(ctx, client, group, map[string][]int32{topic: {partition}})
		if err != nil {
			return Committed{}, err
		}
		block := resp.GetBlock(topic, partition)
		if block == nil {
			return Committed{}, errors.New("no answer for the partition")
		}
		if block.Err != sarama.ErrNoError {
			return Committed{}, block.Err
		}
		return Committed{Offset: block.Offset, Metadata: block.Metadata}, nil
	}
	return func(ctx context.Context, topic string, partition int32) (Committed, error) {
		type answer struct {
			c   Committed
			err error
		}
		done := make(chan answer, 1)
		go func() {
			c, err := fetch(ctx, topic, partition)
			if err == nil && c.Metadata != "" {
				c.End, err = client.GetOffset(topic, partition, sarama.OffsetNewest)
				if err != nil {
					err = fmt.Errorf("end offset: %w", err)
				}
			}
			at := func(offset int64) (*messages.Record, error) {
				rec, _, err := recordAt(client, topic, partition, offset, isolation)
				if err != nil {
					return nil, fmt.Errorf("the record at %d, to check the metadata against the log: %w", offset, err)
				}
				return rec, nil // nil when the log holds none there
			}
			if r, derr := ledger.DecodeMetadata(c.Metadata); err == nil && derr == nil && r.End <= c.End && r.Lead != 0 && r.Tail != 0 && ctx.Err() == nil {
				c.Last, err = at(r.End - 1)
				if err == nil && r.First == r.End-1 {
					c.First = c.Last
				} else if err == nil && ctx.Err() == nil {
					c.First, err = at(r.First)
				}
			}
			done <- answer{c, err}
		}()
		select {
		case a := <-done:
			return a.c, a.err
		case <-ctx.Done():
			return Committed{}, ctx.Err()
		}
	}
}

// resumeOf decides whether the committed metadata may skip records of a
// claim that began at initial and reads its records as reading says
// (readingOf). It may only when the metadata is ours, intact, and speaks of
// the very commit the claim began at: its base is the committed offset,
// sarama started the claim there (not at the oldest offset after the
// committed one fell out of range, say); it speaks of no offset at or past
// the partition's end (which no record finished could be: a log truncated
// by an unclean leader election, or metadata another writer forged); the
// records at its last offset and at its first are still the ones it names
// (a log truncated and written again past its old end holds others: see
// history.go), which it must name (a fingerprint 00000000 is unknown); and
// it was written under the same reading. Otherwise it returns nil and why; the
// claim then replays everything from where it began, which is safe. why is
// empty when there is simply no metadata.
func resumeOf(initial int64, reading string, c Committed) (resume *ledger.Resume, why string) {
	if c.Metadata == "" {
		return nil, ""
	}
	r, err := ledger.DecodeMetadata(c.Metadata)
	switch {
	case errors.Is(err, ledger.ErrForeignMetadata) && strings.HasPrefix(c.Metadata, "pf1:"):
		return nil, "the commit metadata is in version 1, which names no record to check it against the log (written before an upgrade; this replay happens once)"
	case errors.Is(err, ledger.ErrForeignMetadata) && strings.HasPrefix(c.Metadata, "pf2:"):
		return nil, "the commit metadata is in version 2, which names one record to check it against the log, not two (written before an upgrade, or by a consumer of the previous release during a rolling one; this replay happens once)"
	case errors.Is(err, ledger.ErrForeignMetadata):
		return nil, "the commit metadata is not in a format of this consumer (another client, or another version, committed it)"
	case err != nil:
		return nil, err.Error()
	case r.Base != c.Offset:
		return nil, fmt.Sprintf("the commit metadata speaks of offset %d, not of the committed offset %d (another client committed without it)", r.Base, c.Offset)
	case initial != c.Offset:
		return nil, fmt.Sprintf("the claim began at %d, not at the committed offset %d", initial, c.Offset)
	case r.End > c.End:
		return nil, fmt.Sprintf("the commit metadata speaks of offsets up to %d, past the partition's end %d (its log was truncated, or another client wrote it)", r.End-1, c.End)
	case r.Lead == 0 || r.Tail == 0:
		return nil, fmt.Sprintf("the commit metadata names no fingerprint for the record at %d or at %d to check it against the log (it was shortened to fit its size limit, or written by an owner catching up after a handover)", r.First, r.End-1)
	case c.Last == nil || c.Last.GetOffset() != r.End-1:
		return nil, fmt.Sprintf("the log holds no record at %d, the last offset the commit metadata speaks of, to check it against (compacted away, or not read)", r.End-1)
	case fingerprint(c.Last) != r.Tail:
		return nil, fmt.Sprintf("the record at %d is not the one the commit metadata names (fingerprint %08x, not %08x): the log was truncated and written again (an unclean leader election) or the topic made anew", r.End-1, fingerprint(c.Last), r.Tail)
	case c.First == nil || c.First.GetOffset() != r.First:
		return nil, fmt.Sprintf("the log holds no record at %d, the first offset the commit metadata calls finished, to check it against (compacted away, or not read)", r.First)
	case fingerprint(c.First) != r.Lead:
		return nil, fmt.Sprintf("the record at %d is not the one the commit metadata names (fingerprint %08x, not %08x): the log was truncated and written again (an unclean leader election) or the topic made anew", r.First, fingerprint(c.First), r.Lead)
	case r.Reading != reading:
		return nil, fmt.Sprintf("the commit metadata was written reading %q, this consumer reads %q (ordering.isolation): finished under one is not finished under the other", r.Reading, reading)
	}
	return &r, ""
}

// readResume reads the committed metadata of a claim about to start at
// the group's committed offset (sarama's InitialOffset; a claim sarama began
// at the oldest or newest offset has none that applies). A read that fails
// or takes too long leaves the claim without it, with a warning. The read
// ends when the claim does (ended closes: a revoke, or ctx, the session),
// so a slow coordinator never holds a revoked claim past its drain.
func (b *Bridge) readResume(ctx context.Context, ended <-chan struct{}, claim sarama.ConsumerGroupClaim, log *slog.Logger) *ledger.Resume {
	if b.cfg.Committed == nil || claim.InitialOffset() < 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, resumeReadTimeout)
	defer cancel()
	go func() {
		select {
		case <-ended:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := b.cfg.Committed(ctx, claim.Topic(), claim.Partition())
	if isClosed(ended) {
		return nil // the claim ended: nothing will be admitted
	}
	if err != nil {
		log.Warn("could not read the commit metadata; replaying every record above the committed offset", "error", err)
		return nil
	}
	r, why := resumeOf(claim.InitialOffset(), b.reading, c)
	if why != "" {
		log.Warn("commit metadata ignored; replaying every record above the committed offset", "why", why, "metadata_bytes", len(c.Metadata))
	}
	return r
}
