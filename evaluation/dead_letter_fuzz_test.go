package evaluation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
)

// sizeLimitedProducer stands for a dead-letter topic of limit bytes: it
// refuses, as the broker does, a record whose batch could pass the limit
// uncompressed (the batch header and sarama's count of the record), and
// keeps the last record it took.
type sizeLimitedProducer struct {
	sarama.SyncProducer // nil: only SendMessage is used
	limit               int

	mu     sync.Mutex
	stored *sarama.ProducerMessage
}

func (p *sizeLimitedProducer) SendMessage(msg *sarama.ProducerMessage) (int32, int64, error) {
	if 61+msg.ByteSize(2) > p.limit {
		return -1, -1, sarama.ErrMessageSizeTooLarge
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stored = msg
	return 0, 0, nil
}

// fuzzHeaders splits b into headers: each a byte of key length, the key, a
// byte of value length, the value; a header of zero-length key and value is
// one zero byte pair, so a run of zeros is many empty headers.
func fuzzHeaders(b []byte) []*messages.Header {
	var out []*messages.Header
	take := func() []byte {
		if len(b) == 0 {
			return nil
		}
		n := min(int(b[0]), len(b)-1)
		field := b[1 : 1+n]
		b = b[1+n:]
		return field
	}
	for len(b) > 0 {
		out = append(out, &messages.Header{Key: take(), Value: take()})
	}
	return out
}

// FuzzDeadLetterEnvelope feeds whole records (key, value, headers) through
// the listener's decoding of an event (the first thing Handler.Handle does)
// and the pipeline's dead-lettering of what it refuses: the envelope the
// partition actor builds after up to fifteen failed attempts, each with the
// decoder's error (or, for an event it accepts, an error quoting the whole
// value, the worst a handler can do), written by the dead-letter writer to
// a topic of 4 KiB to 1 MiB, whose limit the writer knows or not. The write
// must succeed, within the topic's limit, and the envelope must still name
// the record and match what it left out.
func FuzzDeadLetterEnvelope(f *testing.F) {
	event := func(packages string) []byte {
		return []byte(`{"type":"created","timestamp":"2026-03-01T12:00:00Z","host":{"id":"8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b",` +
			`"org_id":"org-1","reporter":"puptoo","system_profile":{"installed_packages":[` + packages + `]}}}`)
	}
	host := []byte("8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b")
	f.Add(host, event(`"kernel-0:4.18.0-305.el8.x86_64"`), []byte{}, uint16(0), uint8(0), false)
	f.Add(host, event(`"kernel-`+strings.Repeat("x", 5000)+`:4.18.0-305.el8.x86_64"`), []byte{}, uint16(0), uint8(0), true)
	f.Add(bytes.Repeat([]byte{0xfe}, 3000), []byte("not an event"), []byte{}, uint16(1), uint8(3), false)
	f.Add(host, event(`"a"`), make([]byte, 3000), uint16(0), uint8(14), true)
	f.Add(host, []byte(`{"type":"created","host":{"id":1}}`), []byte{5, 't', 'r', 'a', 'c', 'e', 3, 'a', 'b', 'c'}, uint16(64), uint8(1), false)
	f.Add([]byte(nil), event(`"`+strings.Repeat("\u0085", 2000)+`"`), []byte{}, uint16(3), uint8(2), false)

	opts := inventory.DefaultValidationOptions()
	f.Fuzz(func(t *testing.T, key, value, headers []byte, limitSel uint16, attempts uint8, limitKnown bool) {
		record := &messages.Record{Topic: "platform.inventory.events", Partition: 3, Offset: 42, Key: key, Value: value,
			Headers: fuzzHeaders(headers), Timestamp: timestamppb.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
		_, err := inventory.DecodeInventoryEvent(value, opts)
		if err == nil {
			err = errors.New("accepted: " + string(value))
		}
		at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		var failures []*messages.FailedAttempt
		for i := range 1 + int(attempts)%15 {
			failures = append(failures, &messages.FailedAttempt{Attempt: int32(i + 1), ErrorClass: messages.ClassOf(err),
				Error: err.Error(), Dependency: string(value[:min(len(value), 300)]), Time: timestamppb.New(at.Add(time.Duration(i) * time.Second))})
		}
		reason, _ := messages.ValidationReasonOf(err)
		letter := actors.NewDeadLetter(record, failures, "patchman", messages.DeadLetterReason(messages.ClassOf(err), reason))

		limit := 4<<10 + int(limitSel)*16
		p := &sizeLimitedProducer{limit: limit}
		w := &actors.KafkaDeadLetters{Producer: p, Topic: "platform.inventory.events.dlq"}
		if limitKnown {
			w.MaxBytes = limit
		}
		if err := w.Write(context.Background(), letter); err != nil {
			t.Fatalf("dead letter of a record of %d+%d bytes (%d headers) to a topic of %d bytes: %v",
				len(key), len(value), len(record.GetHeaders()), limit, err)
		}
		msg := p.stored
		if k := msg.Key; k != nil && k.Length() > 256 {
			t.Fatalf("the dead-letter record's key is %d bytes", k.Length())
		}
		body, err := msg.Value.Encode()
		if err != nil {
			t.Fatal(err)
		}
		var got messages.DeadLetter
		if err := proto.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if got.GetOriginalTopic() != record.GetTopic() || got.GetOriginalPartition() != 3 || got.GetOriginalOffset() != 42 {
			t.Fatalf("the envelope names %s/%d/%d", got.GetOriginalTopic(), got.GetOriginalPartition(), got.GetOriginalOffset())
		}
		for _, c := range []struct {
			what      string
			whole, in []byte
			cut       *messages.Cut
		}{{"key", key, got.GetKey(), got.GetKeyCut()}, {"value", value, got.GetValue(), got.GetValueCut()}} {
			sum := sha256.Sum256(c.whole)
			if c.cut == nil && !bytes.Equal(c.in, c.whole) ||
				c.cut != nil && (len(c.in) != 0 || c.cut.GetSize() != int64(len(c.whole)) || !bytes.Equal(c.cut.GetSha256(), sum[:])) {
				t.Fatalf("%s of %d bytes kept as %d bytes, cut %v", c.what, len(c.whole), len(c.in), c.cut)
			}
		}
		if hc := got.GetHeadersCut(); hc != nil && !proto.Equal(hc, messages.CutOfHeaders(record.GetHeaders())) ||
			hc == nil && len(got.GetHeaders()) != len(record.GetHeaders()) {
			t.Fatalf("%d headers kept as %d, cut %v", len(record.GetHeaders()), len(got.GetHeaders()), hc)
		}
	})
}
