package actors

import (
	"iter"
	"strconv"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/messages"
)

// What a dead letter quotes is bounded, so that its envelope always fits
// the dead-letter topic: a record's key and headers, and any error text
// (which may quote the record), can each be as large as the record.
const (
	// maxErrorText bounds a failed attempt's error text as the partition
	// actor records it (longer ones are cut, with a marker): the failure
	// history keeps up to historyHead + historyTail of them per record, in
	// memory, in the logs and in the envelope.
	maxErrorText = 4 << 10
	// maxRecordKey bounds the dead-letter record's Kafka key: a longer
	// key is replaced by its marker (messages.CutMarker), the same for
	// the same key, so one key's dead letters still share a partition.
	maxRecordKey = 256
	// keepBytes: a key or set of headers whose encoding is no longer than
	// this is never cut (its Cut would take about as much room). Not below
	// maxRecordKey: a key cut from an envelope is then one whose record is
	// keyed by its marker anyway (deadLetterMessage).
	keepBytes = maxRecordKey
	// historyTextBytes and errorTextBytes are what the first cuts leave
	// of each attempt's error text and dependency, and of the envelope's
	// error.
	historyTextBytes = 256
	errorTextBytes   = 1 << 10
)

// Room a record batch of one record needs besides the record as sarama
// counts it (sarama.ProducerMessage.ByteSize, which already counts each
// varint of the record at its largest): the batch header (61 bytes in
// record batch format v2), the compression frame, and the codec's growth
// of data it cannot shrink. zstd stores such data in raw blocks, 3 bytes
// per 128 KiB, gzip in stored blocks, 5 bytes per 64 KiB; batchSlack of
// 1/512 is far above both.
const (
	batchOverhead = 61 + 512
	batchSlack    = 512
)

// fitBudget returns the largest record (as sarama counts it) whose batch
// fits a topic whose max.message.bytes is maxBytes, compressed or not.
func fitBudget(maxBytes int) int {
	return maxBytes - batchOverhead - maxBytes/batchSlack
}

// sizedEncoder stands for an encoded value of n bytes, to count a record
// without encoding it.
type sizedEncoder int

func (n sizedEncoder) Encode() ([]byte, error) { return make([]byte, n), nil }
func (n sizedEncoder) Length() int             { return int(n) }

// messageSize returns the size of the dead-letter record of letter as
// sarama counts it against Producer.MaxMessageBytes: key, value and
// headers with the record's overhead.
func messageSize(letter *messages.DeadLetter) int {
	return deadLetterMessage("", letter, sizedEncoder(proto.Size(letter))).ByteSize(2)
}

// recordKey returns the Kafka key of the dead-letter record of a record
// keyed key: the key itself, or its marker when longer than maxRecordKey.
func recordKey(key []byte) sarama.Encoder {
	if len(key) > maxRecordKey {
		return markedKey(key)
	}
	return sarama.ByteEncoder(key)
}

// markedKey encodes as the marker of the key it holds, which it computes
// only when encoded: counting a record (messageSize) does not hash its key.
type markedKey []byte

func (k markedKey) Encode() ([]byte, error) { return []byte(messages.CutMarker(k)), nil }
func (k markedKey) Length() int             { return len(messages.CutMarker(nil)) + len(strconv.Itoa(len(k))) - 1 }

// FitDeadLetter returns letter when its dead-letter record fits a topic
// whose max.message.bytes is maxBytes (compressed or not: see fitBudget),
// else a copy cut to fit, never changing letter. What a person needs most
// is kept longest; it cuts, in this order, until the record fits:
//
//  1. each attempt's error text and dependency in the history, to 256
//     bytes (the last error is whole in error);
//  2. the original headers (headers_cut);
//  3. the error text, to 1 KiB;
//  4. the original key (key_cut; the record's own Kafka key is bounded
//     anyway, see recordKey);
//  5. the texts of steps 1 and 3 to their markers alone.
//
// When even that does not fit, the value goes (value_truncated, value_size
// and value_cut), and the steps run again on the whole envelope without
// it, cutting only what the room left without the value needs. When that
// does not fit either, the history goes (history_dropped counts it). The
// original topic, partition and offset, the timestamps, classes, counts,
// the reason, the consumer group and the writer are never cut; a text cut
// ends in "… [truncated, N bytes, sha256 <hex>]", and a Cut gives the size
// and SHA-256 of a field left out, so what is left can be matched to the
// source record.
//
// The result's record fits any topic of a few KiB beyond the names it
// carries (topic, group, member id); below that, the result is as small as
// it gets and the topic refuses it.
func FitDeadLetter(letter *messages.DeadLetter, maxBytes int) *messages.DeadLetter {
	budget := fitBudget(maxBytes)
	if messageSize(letter) <= budget {
		return letter
	}
	l := proto.CloneOf(letter)
	if cutUntil(l, budget) {
		return l
	}
	l = proto.CloneOf(letter)
	cutValue(l)
	if cutUntil(l, budget) {
		return l
	}
	l.HistoryDropped += int32(len(l.GetHistory()))
	l.History = nil
	return l
}

// cutQuotes returns a copy of letter with every step of FitDeadLetter
// taken but the value's: the smallest envelope that keeps the value.
func cutQuotes(letter *messages.DeadLetter) *messages.DeadLetter {
	l := proto.CloneOf(letter)
	for _, step := range quoteCuts {
		step(l)
	}
	return l
}

// quoteCuts are FitDeadLetter's steps 1 to 5, in order. Each changes only
// l, a copy of its own (its history included).
var quoteCuts = []func(l *messages.DeadLetter){
	func(l *messages.DeadLetter) { cutHistoryTexts(l, historyTextBytes) },
	cutHeaders,
	func(l *messages.DeadLetter) { l.Error = messages.CutText(l.GetError(), errorTextBytes) },
	cutKey,
	func(l *messages.DeadLetter) {
		cutHistoryTexts(l, messages.MaxCutMarkerBytes)
		l.Error = messages.CutText(l.GetError(), messages.MaxCutMarkerBytes)
	},
}

// cutUntil takes the steps of quoteCuts on l until its record is within
// budget, and reports whether it is.
func cutUntil(l *messages.DeadLetter, budget int) bool {
	for _, step := range quoteCuts {
		if messageSize(l) <= budget {
			return true
		}
		step(l)
	}
	return messageSize(l) <= budget
}

func cutHistoryTexts(l *messages.DeadLetter, n int) {
	for _, f := range l.GetHistory() {
		f.Error = messages.CutText(f.GetError(), n)
		f.Dependency = messages.CutText(f.GetDependency(), n)
	}
}

func cutHeaders(l *messages.DeadLetter) {
	if proto.Size(&messages.DeadLetter{Headers: l.GetHeaders()}) > keepBytes {
		l.HeadersCut = messages.CutOfHeaders(l.GetHeaders())
		l.Headers = nil
	}
}

func cutKey(l *messages.DeadLetter) {
	if len(l.GetKey()) > keepBytes {
		l.KeyCut = messages.CutOf(l.GetKey())
		l.Key = nil
	}
}

func cutValue(l *messages.DeadLetter) {
	if len(l.GetValue()) > keepBytes {
		l.ValueCut = messages.CutOf(l.GetValue())
		l.ValueTruncated = true
		l.ValueSize = int64(len(l.GetValue()))
		l.Value = nil
	}
}

// fitLadder are the topic limits the envelope is cut for, in turn, when
// the dead-letter topic refused it and its own limit is unknown or
// refused it too: Kafka's default, then a quarter of each; 0 leaves the
// smallest envelope.
var fitLadder = []int{1 << 20, 256 << 10, 64 << 10, 16 << 10, 4 << 10, 0}

// smallerLetters yields the envelopes to write, in turn, when the topic
// refuses letter as too large, each smaller than the one before, computing
// each only when asked for: with maxBytes known (the topic's
// max.message.bytes), letter without its quotes but with its value (which
// may fit compressed) when fitting it for maxBytes cuts the value, then
// letter fitted for maxBytes; then letter fitted for each smaller limit of
// fitLadder, for a topic whose limit is unknown or lower than was read.
func smallerLetters(letter *messages.DeadLetter, maxBytes int) iter.Seq[*messages.DeadLetter] {
	return func(yield func(*messages.DeadLetter) bool) {
		last := messageSize(letter)
		smaller := func(l *messages.DeadLetter) bool {
			n := messageSize(l)
			if n >= last {
				return false
			}
			last = n
			return true
		}
		var fitted *messages.DeadLetter
		if maxBytes > 0 {
			fitted = FitDeadLetter(letter, maxBytes)
		}
		if fitted == nil || fitted.GetValueCut() != nil && letter.GetValueCut() == nil {
			if l := cutQuotes(letter); smaller(l) && !yield(l) {
				return
			}
		}
		if fitted != nil && smaller(fitted) && !yield(fitted) {
			return
		}
		for _, limit := range fitLadder {
			if maxBytes > 0 && limit >= maxBytes {
				continue
			}
			if l := FitDeadLetter(letter, limit); smaller(l) && !yield(l) {
				return
			}
		}
	}
}

// deadLetterMessage builds the record of letter for topic, its encoding
// body. Each send gets a record of its own: sarama keeps its state in the
// record.
func deadLetterMessage(topic string, letter *messages.DeadLetter, body sarama.Encoder) *sarama.ProducerMessage {
	msg := &sarama.ProducerMessage{
		Topic: topic,
		Value: body,
		Headers: []sarama.RecordHeader{
			{Key: []byte("patchflow-error-class"), Value: []byte(letter.GetErrorClass().String())},
			{Key: []byte("patchflow-reason"), Value: []byte(letter.GetReason())},
			{Key: []byte("patchflow-original-topic"), Value: []byte(letter.GetOriginalTopic())},
			{Key: []byte("patchflow-original-partition"), Value: []byte(strconv.Itoa(int(letter.GetOriginalPartition())))},
			{Key: []byte("patchflow-original-offset"), Value: []byte(strconv.FormatInt(letter.GetOriginalOffset(), 10))},
		},
	}
	switch {
	case letter.GetKey() != nil:
		msg.Key = recordKey(letter.GetKey())
	case letter.GetKeyCut() != nil:
		// The key was cut from the envelope: the record keeps the key's
		// marker, as it would have with the key (see recordKey).
		msg.Key = sarama.StringEncoder(letter.GetKeyCut().Marker())
	}
	return msg
}
