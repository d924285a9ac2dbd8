package messages_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/patchflow/patchflow/messages"
)

// A dead-letter reason is the validation reason of a broken message (the
// domain's fixed set, never an error's text), however the handler wrapped
// it, or else the class of the failure, one of DeadLetterReasons.
func TestDeadLetterReason(t *testing.T) {
	const missingOrg messages.Reason = "missing org id"
	broken := fmt.Errorf("decode event: %w", messages.Invalid(missingOrg, "host.org_id is missing"))
	stranger := messages.Permanent(&messages.ValidationError{Reason: "a reason of another handler", Detail: "x"})
	cases := []struct {
		name string
		err  error
		want messages.Reason
	}{
		{"broken message, wrapped", broken, missingOrg},
		{"another domain's validation reason", stranger, "a reason of another handler"},
		{"permanent, not broken", messages.Permanent(errors.New("host not found in inventory")), messages.ReasonPermanent},
		{"transient", messages.Transient(errors.New("vmaas: context deadline exceeded")), messages.ReasonTransient},
		{"unclassified", errors.New("nil map"), messages.ReasonUnknown},
		{"validation reason on a transient failure", messages.Transient(&messages.ValidationError{Reason: "malformed JSON"}), messages.ReasonTransient},
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
	for _, class := range []messages.ErrorClass{messages.ErrorClass_ERROR_CLASS_PERMANENT, messages.ErrorClass_ERROR_CLASS_TRANSIENT, messages.ErrorClass_ERROR_CLASS_UNKNOWN} {
		if got := messages.DeadLetterReason(class, ""); !slices.Contains(messages.DeadLetterReasons(), got) {
			t.Errorf("class %v without a validation reason: %q is not one of DeadLetterReasons", class, got)
		}
	}
	if _, ok := messages.ValidationReasonOf(messages.Skip("host recently deleted", "")); ok {
		t.Error("a skip reads as a broken message")
	}
	if _, ok := messages.ValidationReasonOf(nil); ok {
		t.Error("nil reads as a broken message")
	}
}
