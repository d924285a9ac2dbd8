package e2e

import (
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/messages"

	"github.com/patchflow/patchflow/proving/effects"
)

func (e *Env) saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.DialTimeout = 3 * time.Second
	cfg.Metadata.Retry.Max = 1
	return cfg
}

// createTopics creates the scenario's topic and dead-letter topic.
func (e *Env) createTopics(topic string, partitions int32) error {
	admin, err := sarama.NewClusterAdmin(e.Brokers, e.saramaConfig())
	if err != nil {
		return err
	}
	defer admin.Close()
	fx := effectTopics(topic)
	for _, t := range append([]string{topic, topic + ".dlq"}, fx.List()...) {
		detail := &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}
		if e.Cluster != nil {
			minISR := "2"
			detail.ReplicationFactor, detail.ConfigEntries = 3, map[string]*string{"min.insync.replicas": &minISR}
		}
		if err := admin.CreateTopic(t, detail, false); err != nil {
			return fmt.Errorf("create %s: %w", t, err)
		}
	}
	return nil
}

// effectTopics are the topics a run's listeners publish their effects to.
func effectTopics(topic string) effects.Topics {
	return effects.Topics{Remediations: topic + ".remediations", Notifications: topic + ".notifications", PayloadStatus: topic + ".payload-status"}
}

// deadLetter is one dead-lettered original record, as its envelope says.
type deadLetter struct {
	reason string // the envelope's reason (messages.DeadLetterReasons)
	letter *messages.DeadLetter
}

// deadLetters reads the whole dead-letter topic and returns the distinct
// original records, by "partition/offset": a record dead-lettered, then
// redelivered after a crash before its offset was committed, is written
// twice but counts once (its first envelope is kept). total counts
// envelopes.
func (e *Env) deadLetters(topic string) (map[string]deadLetter, int, error) {
	client, err := sarama.NewClient(e.Brokers, e.saramaConfig())
	if err != nil {
		return nil, 0, err
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, 0, err
	}
	defer consumer.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		return nil, 0, err
	}
	letters := map[string]deadLetter{}
	total := 0
	for _, p := range parts {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, 0, err
		}
		if end == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, 0, err
		}
		for done := false; !done; {
			select {
			case m := <-pc.Messages():
				l := &messages.DeadLetter{}
				if err := proto.Unmarshal(m.Value, l); err != nil {
					pc.Close()
					return nil, 0, fmt.Errorf("dead letter %d/%d does not decode: %w", p, m.Offset, err)
				}
				// The envelope says why in a field of its own; an
				// envelope without it is the listener's defect, counted
				// under a reason no plan expects.
				reason := l.GetReason()
				if reason == "" {
					reason = "(no reason in the envelope)"
				}
				id := fmt.Sprintf("%d/%d", l.GetOriginalPartition(), l.GetOriginalOffset())
				if _, seen := letters[id]; !seen {
					letters[id] = deadLetter{reason: reason, letter: l}
				}
				total++
				done = m.Offset >= end-1
			case <-time.After(15 * time.Second):
				pc.Close()
				return nil, 0, fmt.Errorf("reading dead letters of partition %d timed out", p)
			}
		}
		pc.Close()
	}
	return letters, total, nil
}
