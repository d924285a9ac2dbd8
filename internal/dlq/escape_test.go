package dlq

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"
	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/internal/safetext"
	"github.com/patchflow/patchflow/messages"
)

// hostile draws strings made to reach a reader's terminal: controls (ESC,
// CSI U+009B, OSC U+009D), bidi controls, separators, bytes that are not
// UTF-8, quotes and spaces, among ordinary text.
func hostile() *rapid.Generator[string] {
	special := []rune{0x1b, 0x07, '\n', '\r', 0x7f, 0x9b, 0x9d, 0x9c, 0x202e, 0x202d, 0x2066, 0x2069, 0x200f, 0x2028,
		'\\', '"', ' ', '=', '/', 'é'}
	piece := rapid.OneOf(
		rapid.Map(rapid.SampledFrom(special), func(r rune) string { return string(r) }),
		rapid.Map(rapid.RuneFrom(nil, unicode.Cc, unicode.Bidi_Control), func(r rune) string { return string(r) }),
		rapid.StringN(0, 6, -1),
		rapid.StringMatching(`[a-z.]{1,8}`),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 1, 3), func(b []byte) string { return string(b) }),
	)
	return rapid.Map(rapid.SliceOfN(piece, 0, 8), func(p []string) string { return strings.Join(p, "") })
}

// clean fails t when out holds a rune safetext escapes, or a byte that is
// not UTF-8.
func clean(t *rapid.T, mode string, out []byte) {
	for _, r := range string(out) {
		if safetext.Escapes(r) {
			t.Fatalf("%s output holds %U:\n%q", mode, r, out)
		}
	}
	if !utf8.Valid(out) {
		t.Fatalf("%s output is not UTF-8:\n%q", mode, out)
	}
}

// asJSON is s as a JSON reader reads it back from encoding/json's output
// (a byte that is not UTF-8 becomes U+FFFD).
func asJSON(s string) string {
	b, _ := json.Marshal(s)
	var back string
	_ = json.Unmarshal(b, &back)
	return back
}

// For any envelope, whatever its topic, key, error texts, group, member,
// reason and value hold, what Run prints of it, as a line or as JSON, with
// the value or without, holds no control or bidi control and no byte that
// is not UTF-8. The line shows a topic Kafka could not name quoted; the
// JSON reads back as the envelope's strings.
func TestFormatEscapesEveryField(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		l := &messages.DeadLetter{
			OriginalTopic: hostile().Draw(t, "topic"), OriginalPartition: 2, OriginalOffset: 9,
			Key: []byte(hostile().Draw(t, "key")), Value: []byte(hostile().Draw(t, "value")),
			Headers: []*messages.Header{{Key: []byte(hostile().Draw(t, "header key")), Value: []byte(hostile().Draw(t, "header value"))}},
			Error:   hostile().Draw(t, "error"), Attempts: 1, LastFailureTime: timestamppb.New(at),
			ConsumerGroup: hostile().Draw(t, "group"), MemberId: hostile().Draw(t, "member"), Reason: hostile().Draw(t, "reason"),
			History: []*messages.FailedAttempt{{Attempt: 1, Error: hostile().Draw(t, "history error"),
				Dependency: hostile().Draw(t, "dependency"), Time: timestamppb.New(at)}},
		}
		e := Entry{Partition: 0, Offset: 4, Timestamp: at, Letter: l}
		for _, value := range []bool{false, true} {
			line, err := format(e, false, value)
			if err != nil {
				t.Fatal(err)
			}
			clean(t, "text", line)
			topic := l.GetOriginalTopic()
			if shownTopic(topic) != topic {
				topic = strconv.Quote(topic)
			}
			if want := "2025-03-01T12:00:00.000Z " + topic + "/2/9 key="; !strings.HasPrefix(string(line), want) {
				t.Fatalf("line %q does not start %q", line, want)
			}

			b, err := format(e, true, value)
			if err != nil {
				t.Fatal(err)
			}
			clean(t, "JSON", b)
			var j struct {
				Topic, Key, Error, Reason, Value string
				KeyBase64                        string `json:"key_base64"`
				ConsumerGroup                    string `json:"consumer_group"`
				MemberID                         string `json:"member_id"`
				History                          []struct{ Error, Dependency string }
			}
			if err := json.Unmarshal(b, &j); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, b)
			}
			key := j.Key
			if j.KeyBase64 != "" || !utf8.Valid(l.GetKey()) {
				key = string(l.GetKey()) // base64 is safe as it is
			}
			if j.Topic != asJSON(l.GetOriginalTopic()) || key != string(l.GetKey()) || j.Error != asJSON(l.GetError()) ||
				j.ConsumerGroup != asJSON(l.GetConsumerGroup()) || j.MemberID != asJSON(l.GetMemberId()) || j.Reason != asJSON(Reason(l)) ||
				len(j.History) != 1 || j.History[0].Error != asJSON(l.GetHistory()[0].GetError()) || j.History[0].Dependency != asJSON(l.GetHistory()[0].GetDependency()) {
				t.Fatalf("JSON %s does not read back as the envelope %v", b, l)
			}
			if value && utf8.Valid(l.GetValue()) && j.Value != string(l.GetValue()) {
				t.Fatalf("JSON value %q, want %q", j.Value, l.GetValue())
			}
		}
	})
}

// A topic as Kafka names one is shown as it is; anything else is quoted.
func TestShownTopic(t *testing.T) {
	for topic, want := range map[string]string{
		"platform.inventory.events": "platform.inventory.events",
		"A-b_c.9":                   "A-b_c.9",
		strings.Repeat("t", 249):    strings.Repeat("t", 249),
		strings.Repeat("t", 250):    `"` + strings.Repeat("t", 250) + `"`,
		"":                          `""`,
		"events key=x":              `"events key=x"`,
		"events\u009b31m":           `"events\u009b31m"`,
		"events\u202e":              `"events\u202e"`,
	} {
		if got := shownTopic(topic); got != want {
			t.Errorf("shownTopic(%q) = %s, want %s", topic, got, want)
		}
	}
}
