package dlq

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
)

// Entry is one record of the dead-letter topic, decoded.
type Entry struct {
	Partition int32 // where in the dead-letter topic
	Offset    int64
	Timestamp time.Time // the dead-letter record's own
	Size      int       // of its value
	// Letter is the envelope; nil when the record is not one (Problem says
	// why).
	Letter  *messages.DeadLetter
	Problem string
}

// Decode decodes one record of the dead-letter topic. A record is an
// envelope when its value decodes as a patchflow.v1.DeadLetter that names
// its original topic, as every envelope the listener writes does; anything
// else (another producer's record, a damaged one) comes back with Problem
// set, never as an error: one bad record must not stop the reading.
func Decode(m *sarama.ConsumerMessage) Entry {
	e := Entry{Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp, Size: len(m.Value)}
	l := &messages.DeadLetter{}
	switch err := proto.Unmarshal(m.Value, l); {
	case err != nil:
		e.Problem = err.Error()
	case l.GetOriginalTopic() == "":
		e.Problem = "no original topic"
	default:
		e.Letter = l
	}
	return e
}

// Reason returns the envelope's reason (one of messages.DeadLetterReasons).
// An envelope written before the field existed gets it from its class and,
// for a permanent failure, the validation reason its error text names.
func Reason(l *messages.DeadLetter) string {
	if r := l.GetReason(); r != "" {
		return r
	}
	var validation messages.Reason
	for _, r := range inventory.ValidationReasons() {
		if strings.Contains(l.GetError(), string(r)+":") {
			validation = r
			break
		}
	}
	return string(messages.DeadLetterReason(l.GetErrorClass(), validation))
}

// when is the time a line shows: when the record was given up (its last
// failure), or the dead-letter record's own timestamp when the envelope
// has none.
func (e Entry) when() time.Time {
	if t := e.Letter.GetLastFailureTime(); t != nil {
		return t.AsTime()
	}
	return e.Timestamp
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// Line formats e as one line of text (no newline): the time, the original
// topic/partition/offset, then key, reason, attempts and the last error,
// quoted, and where the record is in the dead-letter topic (dlq=partition/
// offset, for -partition and -offset); then the marker of each field the
// envelope left out to fit its topic (key_cut, headers_cut: "truncated, N
// bytes, sha256 <hex>"); with value, the original value too (or its size
// and marker when the envelope was written without it).
func (e Entry) Line(value bool) string {
	if e.Letter == nil {
		return fmt.Sprintf("%s dlq=%d/%d not a dead-letter envelope (%d bytes): %s", e.Timestamp.UTC().Format(timeFormat),
			e.Partition, e.Offset, e.Size, strconv.Quote(e.Problem))
	}
	l := e.Letter
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%d/%d key=%s reason=%s attempts=%d error=%s dlq=%d/%d", e.when().UTC().Format(timeFormat),
		shownTopic(l.GetOriginalTopic()), l.GetOriginalPartition(), l.GetOriginalOffset(), strconv.Quote(string(l.GetKey())),
		strconv.Quote(Reason(l)), l.GetAttempts(), strconv.Quote(l.GetError()), e.Partition, e.Offset)
	for _, c := range []struct {
		name string
		cut  *messages.Cut
	}{{"key_cut", l.GetKeyCut()}, {"headers_cut", l.GetHeadersCut()}} {
		if c.cut != nil {
			fmt.Fprintf(&b, " %s=%s", c.name, strconv.Quote(c.cut.Marker()))
		}
	}
	if value {
		if l.GetValueTruncated() {
			fmt.Fprintf(&b, " value_truncated=true value_size=%d", l.GetValueSize())
			if c := l.GetValueCut(); c != nil {
				fmt.Fprintf(&b, " value_cut=%s", strconv.Quote(c.Marker()))
			}
		} else {
			fmt.Fprintf(&b, " value=%s", strconv.Quote(string(l.GetValue())))
		}
	}
	return b.String()
}

// jsonLetter is the JSON form of an envelope. Bytes are a string when they
// are UTF-8 (an inventory event, a host id), base64 otherwise (the _base64
// fields).
type jsonLetter struct {
	Time             time.Time     `json:"time"`
	DLQPartition     int32         `json:"dlq_partition"`
	DLQOffset        int64         `json:"dlq_offset"`
	Topic            string        `json:"topic"`
	Partition        int32         `json:"partition"`
	Offset           int64         `json:"offset"`
	Key              *string       `json:"key,omitempty"`
	KeyBase64        *string       `json:"key_base64,omitempty"`
	Reason           string        `json:"reason"`
	Error            string        `json:"error"`
	ErrorClass       string        `json:"error_class"`
	Attempts         int32         `json:"attempts"`
	OwnFailures      int32         `json:"own_failures"`
	FirstFailureTime *time.Time    `json:"first_failure_time,omitempty"`
	ConsumerGroup    string        `json:"consumer_group"`
	Generation       int32         `json:"generation,omitempty"`
	MemberID         string        `json:"member_id,omitempty"`
	History          []jsonAttempt `json:"history"`
	HistoryDropped   int32         `json:"history_dropped"`
	ValueSize        int64         `json:"value_size"`
	ValueTruncated   bool          `json:"value_truncated"`
	// The markers of the fields left out to fit the dead-letter topic.
	KeyCut      string  `json:"key_cut,omitempty"`
	HeadersCut  string  `json:"headers_cut,omitempty"`
	ValueCut    string  `json:"value_cut,omitempty"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

type jsonAttempt struct {
	Attempt    int32     `json:"attempt"`
	ErrorClass string    `json:"error_class"`
	Error      string    `json:"error"`
	Dependency string    `json:"dependency,omitempty"`
	Time       time.Time `json:"time"`
	Own        bool      `json:"own"`
	// Blame is how the failure was judged: own, shared, no evidence,
	// congestion; empty before the field existed, or for a permanent one.
	Blame string `json:"blame,omitempty"`
}

// blameName is a verdict as the JSON shows it: "own", "shared", "no
// evidence", "congestion"; empty when unjudged.
func blameName(b messages.Blame) string {
	if b == messages.Blame_BLAME_UNSPECIFIED {
		return ""
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(b.String(), "BLAME_")), "_", " ")
}

// jsonProblem is the JSON form of a record that is not an envelope.
type jsonProblem struct {
	Time         time.Time `json:"time"`
	DLQPartition int32     `json:"dlq_partition"`
	DLQOffset    int64     `json:"dlq_offset"`
	NotEnvelope  string    `json:"not_envelope"`
	Size         int       `json:"size"`
}

// JSON formats e as one JSON object (no newline): the fields of Line, the
// error class, own failures, first failure time, consumer group and the
// failure history with each failure's verdict, the generation and member
// that wrote it; with value, the original value.
func (e Entry) JSON(value bool) ([]byte, error) {
	if e.Letter == nil {
		return json.Marshal(jsonProblem{Time: e.Timestamp.UTC(), DLQPartition: e.Partition, DLQOffset: e.Offset, NotEnvelope: e.Problem, Size: e.Size})
	}
	l := e.Letter
	j := jsonLetter{Time: e.when().UTC(), DLQPartition: e.Partition, DLQOffset: e.Offset,
		Topic: l.GetOriginalTopic(), Partition: l.GetOriginalPartition(), Offset: l.GetOriginalOffset(),
		Reason: Reason(l), Error: l.GetError(), ErrorClass: className(l.GetErrorClass()), Attempts: l.GetAttempts(),
		OwnFailures: l.GetOwnFailures(), ConsumerGroup: l.GetConsumerGroup(), Generation: l.GetGeneration(), MemberID: l.GetMemberId(),
		HistoryDropped: l.GetHistoryDropped(),
		ValueSize:      l.GetValueSize(), ValueTruncated: l.GetValueTruncated(), History: []jsonAttempt{}}
	if l.GetKey() != nil {
		j.Key, j.KeyBase64 = text(l.GetKey())
	}
	j.KeyCut, j.HeadersCut, j.ValueCut = marker(l.GetKeyCut()), marker(l.GetHeadersCut()), marker(l.GetValueCut())
	if t := l.GetFirstFailureTime(); t != nil {
		at := t.AsTime().UTC()
		j.FirstFailureTime = &at
	}
	for _, h := range l.GetHistory() {
		j.History = append(j.History, jsonAttempt{Attempt: h.GetAttempt(), ErrorClass: className(h.GetErrorClass()),
			Error: h.GetError(), Dependency: h.GetDependency(), Time: h.GetTime().AsTime().UTC(), Own: h.GetOwn(), Blame: blameName(h.GetBlame())})
	}
	if value && !l.GetValueTruncated() {
		j.Value, j.ValueBase64 = text(l.GetValue())
	}
	return json.Marshal(j)
}

// marker returns c's marker, or "" for none.
func marker(c *messages.Cut) string {
	if c == nil {
		return ""
	}
	return c.Marker()
}

// text returns b as a string when it is UTF-8, else as base64.
func text(b []byte) (str, b64 *string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

// className is an error class as the metrics name it: permanent,
// transient, unknown, panic, cancelled.
func className(c messages.ErrorClass) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "ERROR_CLASS_"))
}
