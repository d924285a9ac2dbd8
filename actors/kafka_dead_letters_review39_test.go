package actors_test

import (
	"context"
	"sync"
	"testing"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// perTopicProducer refuses, as a broker does, a record over its topic's limit.
type perTopicProducer struct {
	sarama.SyncProducer
	limits map[string]int
	mu     sync.Mutex
	stored map[string][]*messages.DeadLetter
}

func (p *perTopicProducer) SendMessage(msg *sarama.ProducerMessage) (int32, int64, error) {
	if msg.ByteSize(2) > p.limits[msg.Topic] {
		return -1, -1, sarama.ErrMessageSizeTooLarge
	}
	body, _ := msg.Value.Encode()
	var l messages.DeadLetter
	if err := proto.Unmarshal(body, &l); err != nil {
		return -1, -1, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stored[msg.Topic] = append(p.stored[msg.Topic], &l)
	return 0, 0, nil
}

// Review of 3c4ecda: each letter goes to its source's dead-letter topic, cut
// for that topic's limit (not the least one), and one of an unknown source
// goes to the fallback topic, cut for that one's limit.
func TestReview39DeadLettersRoutedAndCutPerTopic(t *testing.T) {
	p := &perTopicProducer{limits: map[string]int{"a.dlq": 50_000, "b.dlq": 400_000}, stored: map[string][]*messages.DeadLetter{}}
	w := &actors.KafkaDeadLetters{Producer: p, Topic: "a.dlq", MaxBytes: 50_000,
		Topics: map[string]string{"a": "a.dlq", "b": "b.dlq"}, Limits: map[string]int{"a.dlq": 50_000, "b.dlq": 400_000}}
	for _, src := range []string{"a", "b", "c"} {
		l := fullLetter(make([]byte, 300_000))
		l.OriginalTopic = src
		if err := w.Write(context.Background(), l); err != nil {
			t.Fatalf("%s: %v", src, err)
		}
	}
	a, b := p.stored["a.dlq"], p.stored["b.dlq"]
	if len(a) != 2 || len(b) != 1 || b[0].GetOriginalTopic() != "b" || len(b[0].GetValue()) != 300_000 {
		t.Fatalf("a.dlq %d letters, b.dlq %d letters (b's value %d bytes)", len(a), len(b), len(b[0].GetValue()))
	}
	for _, l := range a {
		if l.GetValueCut() == nil {
			t.Errorf("%s's letter in a.dlq not cut", l.GetOriginalTopic())
		}
	}
}
