package actors

import (
	"context"
	"testing"

	"github.com/IBM/sarama"
)

// The read-ahead's byte bound counts what a record costs in memory as the
// byte budget does (WireBytes): headers too, each with HeaderOverhead. Records
// of many empty headers and no key or value weigh nothing by their key and
// value alone, and a claim would hold 1,024 of them (here 32 MiB; with
// 2,000 headers each, 320 MiB per claim) before a single one is admitted.
func TestReadAheadCountsHeaders(t *testing.T) {
	const headers = 200
	in := make(chan *sarama.ConsumerMessage, readAheadRecords)
	for i := range readAheadRecords {
		m := &sarama.ConsumerMessage{Offset: int64(i)}
		for range headers {
			m.Headers = append(m.Headers, &sarama.RecordHeader{})
		}
		in <- m
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newReadAhead(ctx, in, readAheadRecords, readAheadBytes)
	waitAhead(t, "the read-ahead to fill", func() bool { return r.isWaiting() || len(in) == 0 })
	weight := WireBytes(recordOf(<-r.out))
	held := int64(r.queued()+1) * weight
	if held > readAheadBytes+weight {
		t.Fatalf("the read-ahead holds %d records of %d headers, %d bytes by WireBytes; its bound is %d bytes (the last record taken may pass it)",
			r.queued()+1, headers, held, readAheadBytes)
	}
}
