package messages_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/patchflow/patchflow/messages"
)

// A dead-letter reason is the validation reason of a broken message, however
// the handler wrapped it, or else the class of the failure; whatever the
// input, it is one of DeadLetterReasons, so it can be a metric label.
func TestDeadLetterReason(t *testing.T) {
	broken := fmt.Errorf("decode event: %w", messages.Permanent(&messages.ValidationError{Reason: messages.ReasonMissingOrgID, Detail: "host.org_id is missing"}))
	stranger := messages.Permanent(&messages.ValidationError{Reason: "a reason of another handler", Detail: "x"})
	cases := []struct {
		name string
		err  error
		want messages.Reason
	}{
		{"broken message, wrapped", broken, messages.ReasonMissingOrgID},
		{"validation reason outside the set", stranger, messages.ReasonPermanent},
		{"permanent, not broken", messages.Permanent(errors.New("host not found in inventory")), messages.ReasonPermanent},
		{"transient", messages.Transient(errors.New("vmaas: context deadline exceeded")), messages.ReasonTransient},
		{"unclassified", errors.New("nil map"), messages.ReasonUnknown},
		{"validation reason on a transient failure", messages.Transient(&messages.ValidationError{Reason: messages.ReasonMalformedJSON}), messages.ReasonTransient},
	}
	for _, c := range cases {
		v, _ := messages.ValidationReasonOf(c.err)
		got := messages.DeadLetterReason(messages.ClassOf(c.err), v)
		if got != c.want {
			t.Errorf("%s: reason %q, want %q", c.name, got, c.want)
		}
	}
	if r := messages.DeadLetterReason(messages.ErrorClass_ERROR_CLASS_PANIC, ""); r != messages.ReasonPanic {
		t.Errorf("panic: reason %q", r)
	}
	for _, class := range []messages.ErrorClass{messages.ErrorClass_ERROR_CLASS_UNSPECIFIED, messages.ErrorClass_ERROR_CLASS_CANCELLED, 99} {
		if r := messages.DeadLetterReason(class, "free text: connection refused"); r != messages.ReasonUnknown {
			t.Errorf("class %v: reason %q, want unknown", class, r)
		}
	}
	for _, r := range messages.ValidationReasons() {
		if got := messages.DeadLetterReason(messages.ErrorClass_ERROR_CLASS_PERMANENT, r); got != r || !slices.Contains(messages.DeadLetterReasons(), got) {
			t.Errorf("validation reason %q: dead-letter reason %q", r, got)
		}
	}
	if _, ok := messages.ValidationReasonOf(messages.Skip(messages.ReasonHostDeleted, "")); ok {
		t.Error("a skip reads as a broken message")
	}
	if _, ok := messages.ValidationReasonOf(nil); ok {
		t.Error("nil reads as a broken message")
	}
}
