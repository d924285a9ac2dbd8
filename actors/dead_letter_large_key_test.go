package actors_test

import (
	"context"
	"testing"

	"github.com/patchflow/patchflow/actors"
)

// A record whose key passes MAX_KEY_BYTES (key too large) fitted its topic,
// but its envelope carries the key twice, as the dead letter's Kafka key and
// in the envelope, and passes a dead-letter topic of the same limit even
// without the value: the write fails every time and the record holds its
// partition for good, which the refusal was meant to prevent.
func TestDeadLetterOfAKeyTooLargeFitsTheTopicItCameFrom(t *testing.T) {
	const limit = 1_000_000 // the source topic's and the dead-letter topic's max.message.bytes
	p := &fakeProducer{limit: limit}
	w := &actors.KafkaDeadLetters{Producer: p, Topic: "events.dlq"}
	letter := fullLetter([]byte(`{"type":"updated"}`))
	letter.Key = make([]byte, 600_000) // the record: 600 KB of key and a small value, within the limit
	letter.Reason = "key too large"
	letter.ValueSize = int64(len(letter.GetValue()))
	if err := w.Write(context.Background(), letter); err != nil {
		t.Fatalf("the dead letter of a %d-byte key could not be written to a topic taking %d bytes: %v", len(letter.GetKey()), limit, err)
	}
}
