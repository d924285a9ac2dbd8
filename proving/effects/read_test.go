package effects

import (
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/patchflow/patchflow/messages"
)

// Read returns every record of every partition, each partition's in offset
// order with its event id, and leaves out none that is empty.
func TestReadReturnsEveryPartitionInOffsetOrder(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "fx"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// partitions 0, 1 and 3 hold 5, 7 and 1 records; 2 holds none
	want := map[int32]int{0: 5, 1: 7, 3: 1}
	for part, n := range want {
		for i := range n {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "fx", Partition: part, Value: sarama.StringEncoder(fmt.Sprint(i)),
				Headers: []sarama.RecordHeader{{Key: []byte(messages.EventIDHeader), Value: fmt.Appendf(nil, "%d-%d", part, i)}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := Read(c.ListenAddrs(), sarama.V3_6_0_0, "fx")
	if err != nil {
		t.Fatal(err)
	}
	next := map[int32]int64{}
	for _, r := range got {
		if r.Offset != next[r.Partition] || string(r.Value) != fmt.Sprint(r.Offset) || r.EventID != fmt.Sprintf("%d-%d", r.Partition, r.Offset) {
			t.Fatalf("partition %d: record at %d (value %q, id %q), expected offset %d", r.Partition, r.Offset, r.Value, r.EventID, next[r.Partition])
		}
		next[r.Partition]++
	}
	for part, n := range want {
		if next[part] != int64(n) {
			t.Errorf("partition %d: read %d records, produced %d", part, next[part], n)
		}
	}
	if len(got) != 13 {
		t.Errorf("read %d records, produced 13", len(got))
	}
}
