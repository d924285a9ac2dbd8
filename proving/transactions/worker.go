package transactions

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"
)

// worker runs one input partition's loop: read a batch from the group's
// committed offset on, and in one transaction produce a record per input
// record to the same partition of Out and commit the offset past the batch.
type worker struct {
	o    Options
	p    int32
	logf func(string, ...any)
}

type producer struct {
	client sarama.Client
	sarama.SyncProducer
}

func (w *worker) newProducer() (*producer, error) {
	c, err := newClient(w.o.Brokers, txnID(w.o, w.p))
	if err != nil {
		return nil, err
	}
	p, err := sarama.NewSyncProducerFromClient(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &producer{c, p}, nil
}

func (p *producer) close() {
	_ = p.SyncProducer.Close()
	_ = p.client.Close()
}

// txn runs one transaction for batch, which starts at the group's offset.
func (w *worker) txn(p *producer, batch []*sarama.ConsumerMessage) error {
	if err := p.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	msgs := make([]*sarama.ProducerMessage, len(batch))
	for i, m := range batch {
		msgs[i] = &sarama.ProducerMessage{Topic: w.o.Out, Partition: w.p, Value: sarama.StringEncoder(strconv.FormatInt(m.Offset, 10))}
	}
	if err := p.SendMessages(msgs); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	next := batch[len(batch)-1].Offset + 1
	if err := p.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{w.o.In: {{Partition: w.p, Offset: next}}}, w.o.Group); err != nil {
		return fmt.Errorf("add offsets: %w", err)
	}
	if err := p.CommitTxn(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (w *worker) run(ctx context.Context) Report {
	var rep Report
	o := w.o
	name := fmt.Sprintf("partition %d", w.p)
	stuck := func(why string) Report {
		rep.Stuck = append(rep.Stuck, fmt.Sprintf("%s: %s", name, why))
		return rep
	}
	rc, err := newClient(o.Brokers, "")
	if err != nil {
		return stuck(err.Error())
	}
	defer rc.Close()
	consumer, err := sarama.NewConsumerFromClient(rc)
	if err != nil {
		return stuck(err.Error())
	}
	defer consumer.Close()
	lastCommit := time.Now()
	// settle retries f until it succeeds or the partition has stalled.
	settle := func(what string, f func() error) error {
		for {
			err := f()
			if err == nil {
				return nil
			}
			if time.Since(lastCommit) > o.Stall || ctx.Err() != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	var prod *producer
	if err := settle("producer", func() (err error) { prod, err = w.newProducer(); return err }); err != nil {
		return stuck(err.Error())
	}
	defer func() { prod.close() }()
	var pos int64
	if err := settle("committed offset", func() (err error) { pos, err = committed(rc, o, w.p); return err }); err != nil {
		return stuck(err.Error())
	}
	var pc sarama.PartitionConsumer
	open := func() error {
		if pc != nil {
			pc.Close()
		}
		return settle("consume", func() (err error) { pc, err = consumer.ConsumePartition(o.In, w.p, pos); return err })
	}
	if err := open(); err != nil {
		return stuck(err.Error())
	}
	defer func() { pc.Close() }()
	for pos < o.PerPartition {
		if since := time.Since(lastCommit); since > o.Stall || ctx.Err() != nil {
			return stuck(fmt.Sprintf("nothing committed for %.0f s at offset %d", since.Seconds(), pos))
		}
		var batch []*sarama.ConsumerMessage
		wait := time.After(2 * time.Second)
	gather:
		for len(batch) < o.Batch && pos+int64(len(batch)) < o.PerPartition {
			select {
			case m := <-pc.Messages():
				batch = append(batch, m)
			case <-wait:
				break gather
			}
		}
		if len(batch) == 0 {
			continue
		}
		if batch[0].Offset != pos {
			return stuck(fmt.Sprintf("read from %d, the group is at %d", batch[0].Offset, pos))
		}
		last := batch[len(batch)-1].Offset
		err := w.txn(prod, batch)
		if err == nil {
			rep.LongestStall = max(rep.LongestStall, time.Since(lastCommit))
			rep.Transactions++
			pos, lastCommit = last+1, time.Now()
			time.Sleep(o.Pause)
			continue
		}
		// sarama's transaction manager leaves the transaction where the
		// error found it: a fatal error needs a new producer (a new epoch),
		// an abortable one an abort, and a commit or abort cut short (a
		// coordinator gone, say) is retried by calling it again; a new
		// transaction cannot begin before (its example's handleTxnError).
		w.logf("%s: %v (transaction status %s)", name, err, prod.TxnStatus())
		retried := false
		for settled := false; !settled; {
			status := prod.TxnStatus()
			var step error
			switch {
			case status&sarama.ProducerTxnFlagFatalError != 0:
				rep.Fatal++
				prod.close()
				step = settle("producer", func() (err error) { prod, err = w.newProducer(); return err })
				if step != nil {
					return stuck(step.Error())
				}
				continue
			case status&sarama.ProducerTxnFlagAbortableError != 0, status&sarama.ProducerTxnFlagAbortingTransaction != 0,
				status&sarama.ProducerTxnFlagInTransaction != 0:
				if step = prod.AbortTxn(); step == nil {
					rep.Aborted++
				}
			case status&sarama.ProducerTxnFlagCommittingTransaction != 0:
				if step = prod.CommitTxn(); step == nil {
					rep.CommitRetries++
					retried = true
				}
			default:
				settled = true
				continue
			}
			if step != nil {
				if since := time.Since(lastCommit); since > o.Stall || ctx.Err() != nil {
					return stuck(fmt.Sprintf("transaction status %s for %.0f s: %v", prod.TxnStatus(), since.Seconds(), step))
				}
				time.Sleep(250 * time.Millisecond)
			}
		}
		// Where the group stands says whether the transaction committed.
		var now int64
		if err := settle("committed offset", func() (err error) { now, err = committed(rc, o, w.p); return err }); err != nil {
			return stuck(err.Error())
		}
		switch now {
		case last + 1: // committed, by a retry or before the error
			if !retried {
				rep.Ambiguous++
			}
			rep.Transactions++
			rep.LongestStall = max(rep.LongestStall, time.Since(lastCommit))
			lastCommit = time.Now()
		case pos:
		default:
			w.logf("%s: the group is at %d, neither %d nor %d", name, now, pos, last+1)
		}
		pos = now
		if err := open(); err != nil {
			return stuck(err.Error())
		}
	}
	return rep
}
