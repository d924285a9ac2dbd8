package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/patchflow/patchflow/proving/kfakecontrol"
)

// A topic of 200 partitions, one committed, on a cluster 25 ms away: the
// lag read asks each leader once for the newest offsets and once for the
// oldest of those never committed, not once per partition (which took 10 s
// here), and counts every partition.
func TestLagReadOfManyPartitionsAsksEachLeaderOnce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(200, "wide"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sleeper := kfakecontrol.New(c)
	defer sleeper.Stop() // before the close
	var n atomic.Int64
	c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		n.Add(1)
		sleeper.For(25 * time.Millisecond) // the round trip
		return nil, nil, false
	})
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	client, err := sarama.NewClient(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	coord, err := client.Coordinator("wide-group")
	if err != nil {
		t.Fatal(err)
	}
	req := &sarama.OffsetCommitRequest{Version: 2, ConsumerGroup: "wide-group", ConsumerGroupGeneration: -1}
	req.AddBlock("wide", 0, 0, 0, "")
	if _, err := coord.CommitOffset(req); err != nil {
		t.Fatal(err)
	}
	n.Store(0)
	began := time.Now()
	lags, err := NewTopicLagReader(client, "wide-group", []string{"wide"})(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := n.Load(); n != 2 {
		t.Fatalf("%d ListOffsets requests for 200 partitions on one broker (%v); want 2", n, time.Since(began).Round(time.Millisecond))
	}
	if len(lags) != 1 || lags[0].Partitions != 200 || lags[0].Unclaimed != 200 || lags[0].Lag != 0 {
		t.Fatalf("lags %+v", lags)
	}
}
