package actors_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// tb is what the checks need of a test: testing.TB or *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// batchHeader is the size of a record batch's header (format v2), what a
// broker counts against max.message.bytes besides the records.
const batchHeader = 61

// zstdEncoder compresses as the dead-letter producer does (sarama's zstd
// at its default level).
var zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))

// batchSizes returns what a broker would count against max.message.bytes
// for the batch of msg alone: uncompressed, zstd- and gzip-compressed as the
// dead-letter producers compress. The records' bytes are the key, value and
// headers, which the codecs see, and the record's framing, counted at its
// largest (sarama's ByteSize) and as if no codec shrank it.
func batchSizes(t tb, msg *sarama.ProducerMessage) (plain, zstdSize, gzipSize int) {
	var data []byte
	for _, e := range []sarama.Encoder{msg.Key, msg.Value} {
		if e != nil {
			b, err := e.Encode()
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, b...)
		}
	}
	for _, h := range msg.Headers {
		data = append(append(data, h.Key...), h.Value...)
	}
	framing := msg.ByteSize(2) - len(data)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write(data)
	_ = w.Close()
	plain = batchHeader + msg.ByteSize(2)
	zstdSize = batchHeader + framing + len(zstdEncoder.EncodeAll(data, nil))
	gzipSize = batchHeader + framing + gz.Len()
	return plain, zstdSize, gzipSize
}

// blob draws n bytes of one of the kinds a record or an error carries:
// random (no codec shrinks it), one byte repeated, or text of many runes,
// some of them not printable.
func blob(t *rapid.T, label string, n int) []byte {
	seed := rapid.Uint64().Draw(t, label+" seed")
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	src := rand.NewChaCha8(key)
	switch rapid.IntRange(0, 2).Draw(t, label+" kind") {
	case 1:
		return bytes.Repeat([]byte{byte(seed)}, n)
	case 2: // runes below U+3000, many of them not printable
		out := make([]byte, 0, n+utf8.UTFMax)
		for len(out) < n {
			out = utf8.AppendRune(out, rune(src.Uint64()%0x3000))
		}
		return out[:n]
	}
	b := make([]byte, n)
	_, _ = src.Read(b) // never fails
	return b
}

// size draws a length up to n: none, a short one, any, or one near n (the
// cases where limits matter, which a uniform draw seldom reaches).
func size(t *rapid.T, label string, n int) int {
	n = max(n, 0)
	switch rapid.IntRange(0, 3).Draw(t, label+" scale") {
	case 0:
		return 0
	case 1:
		return rapid.IntRange(0, min(n, 300)).Draw(t, label)
	case 2:
		return rapid.IntRange(0, n).Draw(t, label)
	}
	return rapid.IntRange(n-n/4, n).Draw(t, label)
}

// deadLetterCase is a record given up after failures, and the dead-letter
// topic's limit.
type deadLetterCase struct {
	record   *messages.Record
	errors   []string // the failed attempts' error texts, in order
	letter   *messages.DeadLetter
	dlqLimit int
}

// drawDeadLetterCase draws a record within its source topic's limit (key,
// value and headers of any sizes and kinds, a few header fields or
// hundreds of thousands of empty ones), failed attempts whose error texts
// may be as long as the record, and a dead-letter topic's limit: the one
// the listener gives the topic it creates (twice the source's plus 64 KiB),
// or anything down to 16 KiB (a topic created by hand).
func drawDeadLetterCase(t *rapid.T) deadLetterCase {
	sourceLimit := rapid.OneOf(rapid.SampledFrom([]int{16 << 10, 1048588}), rapid.IntRange(16<<10, 1<<20)).Draw(t, "source limit")
	room := sourceLimit - 100
	keyLen := size(t, "key bytes", room)
	room -= keyLen
	var headers []*messages.Header
	switch rapid.IntRange(0, 2).Draw(t, "headers kind") {
	case 1:
		for i := range rapid.IntRange(1, 20).Draw(t, "headers") {
			n := size(t, fmt.Sprintf("header %d bytes", i), room/20)
			headers = append(headers, &messages.Header{Key: []byte(fmt.Sprintf("h%d", i)), Value: blob(t, fmt.Sprintf("header %d", i), n)})
			room -= n + 2
		}
	case 2: // empty headers, up to 50,000 (each takes two bytes in the source, two in the envelope)
		for range size(t, "empty headers", min(room/8, 50_000)) {
			headers = append(headers, &messages.Header{})
		}
		room = 0
	}
	valueLen := size(t, "value bytes", room)
	record := &messages.Record{Topic: "platform.inventory.events", Partition: rapid.Int32Range(0, 1000).Draw(t, "partition"),
		Offset: rapid.Int64Range(0, 1<<50).Draw(t, "offset"), Key: blob(t, "key", keyLen), Value: blob(t, "value", valueLen),
		Headers: headers, Timestamp: timestamppb.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	if keyLen == 0 && rapid.Bool().Draw(t, "no key") {
		record.Key = nil
	}
	var errs []string
	var failures []*messages.FailedAttempt
	for i := range rapid.IntRange(1, 15).Draw(t, "attempts") {
		text := string(blob(t, fmt.Sprintf("error %d", i), size(t, fmt.Sprintf("error %d bytes", i), sourceLimit)))
		errs = append(errs, text)
		failures = append(failures, &messages.FailedAttempt{Attempt: int32(i + 1), ErrorClass: messages.ErrorClass_ERROR_CLASS_UNKNOWN,
			Error: text, Dependency: "vmaas", Time: timestamppb.New(time.Date(2026, 3, 1, 12, 0, i, 0, time.UTC)), Own: true})
	}
	letter := actors.NewDeadLetter(record, failures, "patchman", messages.ReasonUnknown)
	dlqLimit := 2*sourceLimit + 64<<10
	if rapid.Bool().Draw(t, "hand-made topic") {
		dlqLimit = rapid.OneOf(rapid.Just(16<<10), rapid.IntRange(16<<10, dlqLimit)).Draw(t, "dlq limit")
	}
	return deadLetterCase{record: record, errors: errs, letter: letter, dlqLimit: dlqLimit}
}

// checkCut fails unless the field whole is what cut says it was.
func checkCut(t tb, field string, cut *messages.Cut, whole []byte) {
	t.Helper()
	sum := sha256.Sum256(whole)
	if cut.GetSize() != int64(len(whole)) || !bytes.Equal(cut.GetSha256(), sum[:]) {
		t.Fatalf("%s cut as %d bytes, sha256 %x; it was %d bytes, sha256 %x", field, cut.GetSize(), cut.GetSha256(), len(whole), sum)
	}
}

// checkFitted fails unless fitted is letter, or letter cut as FitDeadLetter
// documents: nothing of what names the record changed, each field either
// whole or left out with a Cut that matches it, each text either whole or a
// start of it with its marker.
func checkFitted(t tb, c deadLetterCase, letter, fitted *messages.DeadLetter) {
	t.Helper()
	r := c.record
	if fitted.GetOriginalTopic() != r.GetTopic() || fitted.GetOriginalPartition() != r.GetPartition() || fitted.GetOriginalOffset() != r.GetOffset() {
		t.Fatalf("the envelope names %s/%d/%d, the record is %s/%d/%d", fitted.GetOriginalTopic(), fitted.GetOriginalPartition(),
			fitted.GetOriginalOffset(), r.GetTopic(), r.GetPartition(), r.GetOffset())
	}
	kept := proto.CloneOf(fitted)
	want := proto.CloneOf(letter)
	for _, l := range []*messages.DeadLetter{kept, want} {
		l.Key, l.KeyCut, l.Value, l.ValueCut, l.ValueTruncated, l.Headers, l.HeadersCut, l.Error, l.History, l.HistoryDropped = nil, nil, nil, nil, false, nil, nil, "", nil, 0
	}
	if !proto.Equal(kept, want) {
		t.Fatalf("cutting changed what it never cuts:\n got %v\nwant %v", kept, want)
	}
	if fitted.GetKeyCut() != nil {
		checkCut(t, "key", fitted.GetKeyCut(), r.GetKey())
	} else if !bytes.Equal(fitted.GetKey(), r.GetKey()) {
		t.Fatalf("key of %d bytes kept as %d bytes", len(r.GetKey()), len(fitted.GetKey()))
	}
	if fitted.GetValueCut() != nil {
		checkCut(t, "value", fitted.GetValueCut(), r.GetValue())
		if !fitted.GetValueTruncated() || fitted.GetValueSize() != int64(len(r.GetValue())) {
			t.Fatalf("value cut, but value_truncated %v, value_size %d", fitted.GetValueTruncated(), fitted.GetValueSize())
		}
	} else if !bytes.Equal(fitted.GetValue(), r.GetValue()) || fitted.GetValueTruncated() {
		t.Fatalf("value of %d bytes kept as %d bytes (value_truncated %v) without a cut", len(r.GetValue()), len(fitted.GetValue()), fitted.GetValueTruncated())
	}
	if hc := fitted.GetHeadersCut(); hc != nil {
		if want := messages.CutOfHeaders(r.GetHeaders()); !proto.Equal(hc, want) {
			t.Fatalf("headers cut as %v, want %v", hc, want)
		}
	} else if len(fitted.GetHeaders()) != len(r.GetHeaders()) {
		t.Fatalf("%d headers kept of %d, without a cut", len(fitted.GetHeaders()), len(r.GetHeaders()))
	}
	checkText(t, "error", fitted.GetError(), c.errors[len(c.errors)-1])
	history := fitted.GetHistory()
	if int(fitted.GetHistoryDropped())+len(history) != len(c.errors) {
		t.Fatalf("history of %d attempts and %d dropped; there were %d", len(history), fitted.GetHistoryDropped(), len(c.errors))
	}
	for _, f := range history {
		checkText(t, fmt.Sprintf("attempt %d's error", f.GetAttempt()), f.GetError(), c.errors[f.GetAttempt()-1])
	}
}

// checkText fails unless got is text whole, or a start of it followed by
// the marker of the whole text.
func checkText(t tb, field, got, text string) {
	t.Helper()
	whole := strings.ToValidUTF8(text, "\ufffd")
	if got == whole {
		return
	}
	sum := sha256.Sum256([]byte(whole))
	marker := fmt.Sprintf("[truncated, %d bytes, sha256 %s]", len(whole), hex.EncodeToString(sum[:]))
	start, ok := strings.CutSuffix(got, marker)
	if !ok {
		t.Fatalf("%s of %d bytes kept as %d bytes not ending in its marker %s", field, len(text), len(got), marker)
	}
	if !strings.HasPrefix(whole, strings.TrimSuffix(start, "… ")) {
		t.Fatalf("%s cut to %q..., not a start of it", field, start[:min(len(start), 40)])
	}
}

// For any record within its source topic's limit, any failures (error
// texts as long as the record) and any dead-letter topic from 16 KiB to the
// listener's own sizing, the envelope FitDeadLetter leaves fits the topic
// uncompressed and compressed as the dead-letter producers compress, as
// sarama counts it (key, value, headers and framing); it still names the
// record, and every cut says the size and SHA-256 of what it left out. It
// cuts in the documented order (a field of a step is cut only after every
// field of the steps before it that could be), and the value only when the
// envelope with every quote cut to its marker does not fit. Writing it, on
// a producer that refuses what would not fit the topic, succeeds.
func TestFitDeadLetterFitsTheTopic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawDeadLetterCase(t)
		before := proto.CloneOf(c.letter)
		fitted := actors.FitDeadLetter(c.letter, c.dlqLimit)
		if !proto.Equal(c.letter, before) {
			t.Fatal("FitDeadLetter changed its argument")
		}
		checkFitted(t, c, c.letter, fitted)
		body, err := proto.Marshal(fitted)
		if err != nil {
			t.Fatal(err)
		}
		msg := actors.DeadLetterMessage("events.dlq", fitted, sarama.ByteEncoder(body))
		if n := msg.ByteSize(2); n > actors.FitBudget(c.dlqLimit) {
			t.Fatalf("fitted record of %d bytes (sarama's count), over the budget %d of a %d-byte topic", n, actors.FitBudget(c.dlqLimit), c.dlqLimit)
		}
		plain, z, g := batchSizes(t, msg)
		if plain > c.dlqLimit || z > c.dlqLimit || g > c.dlqLimit {
			t.Fatalf("batch of %d bytes plain, %d zstd, %d gzip: over the topic's %d", plain, z, g, c.dlqLimit)
		}
		checkRecordKey(t, msg, c.record.GetKey())
		checkOrder(t, c.letter, fitted, c.dlqLimit)

		p := &fakeProducer{limit: c.dlqLimit - batchHeader}
		w := &actors.KafkaDeadLetters{Producer: p, Topic: "events.dlq", MaxBytes: c.dlqLimit}
		if rapid.Bool().Draw(t, "limit unknown") {
			w.MaxBytes = 0
		}
		if err := w.Write(context.Background(), c.letter); err != nil {
			t.Fatalf("write of a %d-byte envelope to a %d-byte topic: %v", actors.MessageSize(c.letter), c.dlqLimit, err)
		}
		checkFitted(t, c, c.letter, p.attempts[len(p.attempts)-1])
		checkRecordKey(t, p.stored[len(p.stored)-1], c.record.GetKey())
	})
}

// checkRecordKey fails unless msg, a dead-letter record of a record keyed
// key, is keyed by key when it is at most MaxRecordKey bytes long, else by
// its marker, whatever its envelope left out: one key's dead letters share
// a partition.
func checkRecordKey(t tb, msg *sarama.ProducerMessage, key []byte) {
	t.Helper()
	want := key
	if len(key) > actors.MaxRecordKey {
		want = []byte(messages.CutMarker(key))
	}
	var got []byte
	if msg.Key != nil {
		var err error
		if got, err = msg.Key.Encode(); err != nil {
			t.Fatal(err)
		}
		if len(got) != msg.Key.Length() {
			t.Fatalf("the dead-letter record's key is %d bytes, and says it is %d", len(got), msg.Key.Length())
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the dead-letter record of a record keyed %.40q... (%d bytes) is keyed %.40q... (%d bytes)", key, len(key), got, len(got))
	}
}

// checkOrder fails unless fitted was cut in FitDeadLetter's order: a step
// took effect only once every step before it was done (its field cut as
// the step cuts it, or too short to cut), and the value is cut only when
// cutting every quote to its marker is not enough.
func checkOrder(t tb, letter, fitted *messages.DeadLetter, limit int) {
	t.Helper()
	historyDone, historyCut := true, false
	if fitted.GetHistoryDropped() == letter.GetHistoryDropped() {
		for i, f := range fitted.GetHistory() {
			historyDone = historyDone && len(f.GetError()) <= actors.HistoryTextBytes && len(f.GetDependency()) <= actors.HistoryTextBytes
			historyCut = historyCut || !proto.Equal(f, letter.GetHistory()[i])
		}
	}
	steps := []struct {
		name       string
		done, took bool
	}{
		{"the history's texts", historyDone, historyCut},
		{"the headers", fitted.GetHeadersCut() != nil || proto.Size(&messages.DeadLetter{Headers: fitted.GetHeaders()}) <= actors.KeepBytes,
			fitted.GetHeadersCut() != nil},
		{"the error", len(fitted.GetError()) <= actors.ErrorTextBytes, fitted.GetError() != letter.GetError()},
		{"the key", fitted.GetKeyCut() != nil || len(fitted.GetKey()) <= actors.KeepBytes, fitted.GetKeyCut() != nil},
	}
	for i, s := range steps {
		for _, before := range steps[:i] {
			if s.took && !before.done {
				t.Fatalf("%s was cut before %s", s.name, before.name)
			}
		}
	}
	if fitted.GetValueCut() != nil && letter.GetValueCut() == nil {
		if n := actors.MessageSize(actors.CutQuotes(letter)); n <= actors.FitBudget(limit) {
			t.Fatalf("value cut, but the envelope with it and every quote cut is %d bytes, within the budget %d", n, actors.FitBudget(limit))
		}
	}
}

// A handler's error is recorded at most MaxErrorText bytes long, cut with
// the marker of the whole text: an error that quotes its record (600 KB
// here, not all of it UTF-8) was kept whole for each attempt, in memory,
// in the logs and twice in the envelope (error and history).
func TestPartitionRecordsErrorTextsBounded(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	f := newPartitionFixture(t, testSettings(ordering.ByKey), dlq)
	f.admit(5, "host-1")
	expectCall(t, f.handler)
	text := "package " + strings.Repeat("kernel-\xff:", 60_000) + " is not a NEVRA"
	f.handler.answer(5, func() error { return messages.Permanent(errors.New(text)) })
	var letter *messages.DeadLetter
	select {
	case letter = <-dlq.seen:
	case <-time.After(3 * time.Second):
		t.Fatal("no dead-letter write")
	}
	f.marker.expectMark(t, 6)
	texts := []string{letter.GetError()}
	for _, h := range letter.GetHistory() {
		texts = append(texts, h.GetError())
	}
	for _, got := range texts {
		if len(got) > actors.MaxErrorText {
			t.Fatalf("an error text of %d bytes in the envelope, over %d", len(got), actors.MaxErrorText)
		}
		checkText(t, "the error", got, text)
	}
}
