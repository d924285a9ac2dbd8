package dlq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

// Summary counts what a run printed.
type Summary struct {
	Letters     int // dead-letter envelopes
	NotEnvelope int // records that are not envelopes
}

// Run reads cfg.Topic and writes a line (or a JSON object) per record to out.
// Without cfg.Follow it reads each partition in turn, up to the end offset
// it had at start, and returns; with it, it reads every partition at once
// until ctx ends, and returns nil then. It stops at the first error reading
// the topic or writing out.
func Run(ctx context.Context, cfg *Config, out io.Writer) (Summary, error) {
	scfg := sarama.NewConfig()
	scfg.ClientID = "patchflow-dlq"
	scfg.Version = cfg.Version
	scfg.Consumer.Return.Errors = true
	scfg.Metadata.Full = false
	if err := cfg.Security.Apply(scfg); err != nil {
		return Summary{}, err
	}
	client, err := sarama.NewClient(cfg.Brokers, scfg)
	if err != nil {
		return Summary{}, fmt.Errorf("connect to %v: %w", cfg.Brokers, err)
	}
	defer client.Close()
	parts, err := client.Partitions(cfg.Topic)
	if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return Summary{}, fmt.Errorf("dead-letter topic %s does not exist (set KAFKA_DLQ_TOPIC, or KAFKA_TOPIC as the listener has it): %w", cfg.Topic, err)
	}
	if err != nil {
		return Summary{}, fmt.Errorf("partitions of %s: %w", cfg.Topic, err)
	}
	if cfg.Partition >= 0 {
		if !slices.Contains(parts, int32(cfg.Partition)) {
			return Summary{}, fmt.Errorf("dead-letter topic %s has no partition %d (it has %d)", cfg.Topic, cfg.Partition, len(parts))
		}
		parts = []int32{int32(cfg.Partition)}
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return Summary{}, err
	}
	defer consumer.Close()

	p := &printer{out: out, cfg: cfg}
	ranges := make([]span, 0, len(parts))
	for _, part := range parts {
		r, err := spanOf(client, cfg, part)
		if err != nil {
			return Summary{}, err
		}
		ranges = append(ranges, r)
	}
	if !cfg.Follow {
		left := markersOnly(actors.NewFetchProbe(client, scfg.Consumer.IsolationLevel))
		for _, r := range ranges {
			if err := readPartition(ctx, consumer, cfg.Topic, r, p, left); err != nil {
				return p.summary, err
			}
		}
		return p.summary, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(ranges))
	var wg sync.WaitGroup
	for _, r := range ranges {
		r.end = -1
		wg.Go(func() {
			if err := readPartition(ctx, consumer, cfg.Topic, r, p, nil); err != nil {
				errs <- err
				cancel()
			}
		})
	}
	wg.Wait()
	close(errs)
	return p.summary, <-errs // nil once ctx ended without an error
}

// span is what to read of one partition: from start up to end (exclusive;
// -1: for ever).
type span struct {
	partition  int32
	start, end int64
}

// spanOf finds where cfg reads part from, and its end now.
func spanOf(client sarama.Client, cfg *Config, part int32) (span, error) {
	oldest, err := client.GetOffset(cfg.Topic, part, sarama.OffsetOldest)
	if err != nil {
		return span{}, fmt.Errorf("oldest offset of %s/%d: %w", cfg.Topic, part, err)
	}
	newest, err := client.GetOffset(cfg.Topic, part, sarama.OffsetNewest)
	if err != nil {
		return span{}, fmt.Errorf("end offset of %s/%d: %w", cfg.Topic, part, err)
	}
	s := span{partition: part, start: oldest, end: newest}
	switch cfg.From {
	case FromOldest:
	case FromNewest:
		s.start = newest
	default:
		s.start = min(max(cfg.Offset, oldest), newest)
	}
	return s, nil
}

// endIdle is how long a partition read up to an end delivers nothing
// before the broker is asked whether anything is left below it.
const endIdle = time.Second

// markersOnly returns whether nothing deliverable is left of a partition
// from next up to end: the settle probe finds nothing deliverable at next,
// and the leader's high watermark reaches end (a new leader's can lag
// behind the end found at start, and a fetch below the end then answers no
// records at all), or its log ends below end (an unclean election
// truncated it, and the rest is gone). An error is a no.
func markersOnly(probe actors.SettleProbe) func(topic string, partition int32, next, end int64) bool {
	return func(topic string, partition int32, next, end int64) bool {
		done, err := probe(topic, partition, next, end)
		return err == nil && done
	}
}

// readPartition prints the records of r. The listener's dead-letter
// producer is idempotent, not transactional, so below the end every offset
// it wrote holds a record; but another producer's transaction leaves a
// marker, which is never delivered. So once nothing has come for endIdle,
// settled (when not nil) asks the broker whether anything deliverable is
// left from the next offset up to the end; nothing is, and the read ends
// there. Records past the end (written since the read began) are not
// printed.
func readPartition(ctx context.Context, consumer sarama.Consumer, topic string, r span, p *printer, settled func(topic string, partition int32, next, end int64) bool) error {
	if r.end >= 0 && r.start >= r.end {
		return nil
	}
	pc, err := consumer.ConsumePartition(topic, r.partition, r.start)
	if err != nil {
		return fmt.Errorf("read %s/%d from offset %d: %w", topic, r.partition, r.start, err)
	}
	defer pc.Close()
	var idle <-chan time.Time // nil (never) when reading for ever
	if r.end >= 0 && settled != nil {
		t := time.NewTicker(endIdle)
		defer t.Stop()
		idle = t.C
	}
	next, quiet := r.start, false
	for {
		select {
		case m := <-pc.Messages():
			if r.end >= 0 && m.Offset >= r.end {
				return nil
			}
			if err := p.print(Decode(m)); err != nil {
				return err
			}
			if r.end >= 0 && m.Offset+1 >= r.end {
				return nil
			}
			next, quiet = m.Offset+1, false
		case <-idle:
			if quiet {
				if settled(topic, r.partition, next, r.end) {
					return nil // the rest up to the end is transaction markers
				}
			}
			quiet = true
		case err := <-pc.Errors():
			return fmt.Errorf("read %s/%d: %w", topic, r.partition, err)
		case <-ctx.Done():
			return nil
		}
	}
}

// printer writes entries to out, one per line (format: escaped), from any
// goroutine.
type printer struct {
	mu      sync.Mutex
	out     io.Writer
	cfg     *Config
	summary Summary
}

func (p *printer) print(e Entry) error {
	line, err := format(e, p.cfg.JSON, p.cfg.Value)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Letter != nil {
		p.summary.Letters++
	} else {
		p.summary.NotEnvelope++
	}
	if _, err := p.out.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}
