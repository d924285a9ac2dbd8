package loadgen

import (
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

// A missing topic stops loadgen before it sends, with the commands that
// create it; -create-topic creates it once.
func TestCheckTopic(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	const topic = "platform.inventory.events"

	created, err := CheckTopic(brokers, sarama.V3_6_0_0, topic, false, 3)
	if !errors.Is(err, ErrNoTopic) || created {
		t.Fatalf("missing topic: created %v, err %v; want ErrNoTopic", created, err)
	}
	for _, want := range []string{topic, "-create-topic", "kafka-topics.sh", "make kafka-up"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	if created, err = CheckTopic(brokers, sarama.V3_6_0_0, topic, true, 3); err != nil || !created {
		t.Fatalf("create: created %v, err %v", created, err)
	}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil || len(parts) != 3 {
		t.Fatalf("partitions of the created topic: %v, %v; want 3", parts, err)
	}
	if created, err = CheckTopic(brokers, sarama.V3_6_0_0, topic, true, 3); err != nil || created {
		t.Fatalf("existing topic: created %v, err %v; want neither", created, err)
	}
}
