package actors

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/IBM/sarama"
	"github.com/patchflow/patchflow/messages"
)

// The commit metadata ties what it calls finished to the log's history: it
// names the fingerprints of two records, the one at the last offset it
// speaks of and the first one a resume would skip, and a claim resumes from
// it only when the records at both offsets now have the same fingerprints.
// Kafka's own tie is the leader epoch (OffsetsForLeaderEpoch), which sarama
// neither sends nor hands to consumers with a record, so the records'
// content stands in for it: an unclean leader election that truncated the
// log, or a topic deleted and made again, puts other records at the same
// offsets, and a resume trusting the offsets alone would skip them unrun.
// What two records cannot tell apart is in docs/architecture.md ("Commit
// metadata", "When it is trusted").

var fingerprintTable = crc32.MakeTable(crc32.Castagnoli)

// fingerprint is the CRC-32C of a record's key, value, timestamp (in
// milliseconds, 0 when the record has none) and headers (their count, then
// each one's key and value, in order), each length-prefixed so that no two
// different records write the same bytes. A header's value, like the key
// and value, counts by its bytes: a null one and an empty one are the same
// (proto3 bytes fields, as messages.Record carries them, do not tell them
// apart either). Two records written apart match by chance once in 2³²;
// identical records written in the same millisecond match always
// (documented in docs/architecture.md, "Commit metadata").
func fingerprint(r *messages.Record) uint32 {
	var n [8]byte
	h := crc32.New(fingerprintTable)
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field(r.GetKey())
	field(r.GetValue())
	var ms int64
	if ts := r.GetTimestamp(); ts != nil {
		ms = ts.AsTime().UnixMilli()
	}
	binary.BigEndian.PutUint64(n[:], uint64(ms))
	h.Write(n[:])
	binary.BigEndian.PutUint64(n[:], uint64(len(r.GetHeaders())))
	h.Write(n[:])
	for _, hd := range r.GetHeaders() {
		field(hd.GetKey())
		field(hd.GetValue())
	}
	return h.Sum32()
}

// readingOf is the token the commit metadata carries for how a claim reads
// and runs its records. A resume across a change of either part would be
// wrong: under read_committed aborted records are never delivered and their
// offsets count as finished, which read_uncommitted would then skip; and a
// record finished out of key order (unordered) would let a key-ordered
// successor replay an older event of a host after a newer one.
func readingOf(order fmt.Stringer, isolation sarama.IsolationLevel) string {
	iso := "ru"
	if isolation == sarama.ReadCommitted {
		iso = "rc"
	}
	return order.String() + "." + iso
}

// recordAt fetches the record at offset from the partition's leader, as a
// consumer with isolation would be given it (key, value, timestamp and
// headers: what fingerprint covers); found is false when the log
// holds no record there in the current format (compacted away, a
// transaction marker, a message set of the pre-0.11 format).
func recordAt(client sarama.Client, topic string, partition int32, offset int64, isolation sarama.IsolationLevel) (rec *messages.Record, found bool, err error) {
	leader, err := client.Leader(topic, partition)
	if err != nil {
		return nil, false, fmt.Errorf("leader of %s/%d: %w", topic, partition, err)
	}
	block, err := fetchBlock(leader, topic, partition, offset, isolation)
	if err != nil {
		return nil, false, err
	}
	for _, set := range block.RecordsSet {
		b := set.RecordBatch
		if b == nil || b.Control {
			continue
		}
		for _, r := range b.Records {
			if b.FirstOffset+r.OffsetDelta != offset {
				continue
			}
			ts := b.FirstTimestamp.Add(r.TimestampDelta)
			if b.LogAppendTime {
				ts = b.MaxTimestamp
			}
			return recordOf(&sarama.ConsumerMessage{Topic: topic, Partition: partition, Offset: offset,
				Key: r.Key, Value: r.Value, Timestamp: ts, Headers: r.Headers}), true, nil
		}
	}
	return nil, false, nil
}
