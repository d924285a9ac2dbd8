package transactions

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Without faults, on the in-process broker, the loop carries every input
// record to exactly one committed output record and the group's offsets to
// the end; the check that the cluster runs judges it so.
func TestProbeWithoutFaultsIsExactlyOnce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep, err := Probe(context.Background(), Options{
		Brokers: c.ListenAddrs(), In: "in", Out: "out", Group: "g", Partitions: 2, PerPartition: 300, Batch: 7,
		Stall: 30 * time.Second, Log: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() || rep.Transactions < 2*300/7 {
		t.Fatalf("%s", rep.Line())
	}
}

// The check finds what exactly-once forbids: an output record the loop
// never wrote, one it wrote twice, and offsets short of the end.
func TestProbeCheckSeesMissingAndDuplicated(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := Options{Brokers: c.ListenAddrs(), In: "in", Out: "out", Group: "g", Partitions: 1, PerPartition: 4}
	client, err := newClient(o.Brokers, "")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// out holds 0, 1, 0, 1 (2 and 3 missing, 0 and 1 twice); the group
	// committed nothing.
	if err := produceInput(client, Options{Brokers: o.Brokers, In: "out", Partitions: 1, PerPartition: 2}); err != nil {
		t.Fatal(err)
	}
	if err := produceInput(client, Options{Brokers: o.Brokers, In: "out", Partitions: 1, PerPartition: 2}); err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := check(client, o, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Missing != 2 || rep.Duplicated != 2 || len(rep.OffsetsWrong) != 1 || !rep.Failed() {
		t.Fatalf("%s", rep.Line())
	}
}
