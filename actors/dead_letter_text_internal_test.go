package actors

import (
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/messages"
)

// An envelope encodes whatever bytes the handler's failures carried (an
// error quoting its input, a dependency named from it): protobuf refuses a
// string field that is not UTF-8, so an envelope built from them verbatim
// failed every write and held its partition for good. The recorded
// attempts, which the partition's state shares, stay as they were.
func TestDeadLetterEncodesFailuresThatAreNotUTF8(t *testing.T) {
	h := &failureHistory{}
	for i := range historyHead + historyTail + 2 {
		h.add(&messages.FailedAttempt{Attempt: int32(i + 1), ErrorClass: messages.ErrorClass_ERROR_CLASS_TRANSIENT,
			Error: "field \xff\xfe is bad", Dependency: "db\xff", Time: timestamppb.New(time.Now())})
	}
	letter := newDeadLetter(&messages.Record{Topic: "t", Value: []byte("\xff")}, h, "g", "broken \xfe")
	if _, err := proto.Marshal(letter); err != nil {
		t.Fatalf("the envelope does not encode: %v", err)
	}
	if got, want := letter.GetError(), "field \ufffd is bad"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	if got, want := letter.GetReason(), "broken \ufffd"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	if n := len(letter.GetHistory()); n != historyHead+historyTail {
		t.Errorf("history of %d attempts, want %d", n, historyHead+historyTail)
	}
	for _, f := range h.attempts() {
		if utf8.ValidString(f.GetError()) || utf8.ValidString(f.GetDependency()) {
			t.Fatalf("a recorded attempt was changed: %q, %q", f.GetError(), f.GetDependency())
		}
	}
}
