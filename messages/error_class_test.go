package messages_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/patchflow/patchflow/messages"
)

func TestClassOf(t *testing.T) {
	base := errors.New("boom")
	cases := []struct {
		name      string
		err       error
		want      messages.ErrorClass
		retryable bool
	}{
		{"nil", nil, messages.ErrorClass_ERROR_CLASS_UNSPECIFIED, false},
		{"plain", base, messages.ErrorClass_ERROR_CLASS_UNKNOWN, true},
		{"permanent", messages.Permanent(base), messages.ErrorClass_ERROR_CLASS_PERMANENT, false},
		{"transient", messages.Transient(base), messages.ErrorClass_ERROR_CLASS_TRANSIENT, true},
		{"wrapped permanent", fmt.Errorf("decode: %w", messages.Permanent(base)), messages.ErrorClass_ERROR_CLASS_PERMANENT, false},
		{"outermost wins", messages.Transient(messages.Permanent(base)), messages.ErrorClass_ERROR_CLASS_TRANSIENT, true},
		{"cancelled", fmt.Errorf("query: %w", context.Canceled), messages.ErrorClass_ERROR_CLASS_CANCELLED, false},
		{"deadline", context.DeadlineExceeded, messages.ErrorClass_ERROR_CLASS_TRANSIENT, true},
	}
	for _, c := range cases {
		if got := messages.ClassOf(c.err); got != c.want {
			t.Errorf("%s: ClassOf = %v, want %v", c.name, got, c.want)
		}
		if got := messages.ClassOf(c.err).Retryable(); got != c.retryable {
			t.Errorf("%s: Retryable = %v, want %v", c.name, got, c.retryable)
		}
	}
	if !errors.Is(messages.Permanent(base), base) {
		t.Error("Permanent hides the wrapped error from errors.Is")
	}
	if messages.Permanent(nil) != nil || messages.Transient(nil) != nil {
		t.Error("classifying nil must stay nil")
	}
}
