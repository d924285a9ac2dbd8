package actors

import (
	"context"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

// One topic the read cannot read (here: deleted, or never made) does not
// cost the others theirs: they are read, and the error names the one.
func TestLagReadOfOneBadTopicReadsTheOthers(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Metadata.Retry.Max = 0
	client, err := sarama.NewClient(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	lags, err := NewTopicLagReader(client, "g", []string{"a", "gone", "b"})(context.Background())
	if err == nil || !strings.Contains(err.Error(), "topic gone") {
		t.Fatalf("error %v; want one naming topic gone", err)
	}
	if len(lags) != 2 || lags[0].Topic != "a" || lags[1].Topic != "b" || lags[0].Partitions != 2 || lags[1].Partitions != 2 {
		t.Fatalf("lags %+v; want a's and b's", lags)
	}
}
