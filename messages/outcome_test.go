package messages_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/patchflow/patchflow/messages"
)

func TestFailedInKeepsClassAndNamesInnermostDependency(t *testing.T) {
	inner := messages.FailedIn("vmaas", messages.Transient(errors.New("503")))
	outer := messages.FailedIn(messages.DependencyDatabase, fmt.Errorf("evaluate: %w", inner))
	if got := messages.DependencyOf(outer); got != "vmaas" {
		t.Fatalf("DependencyOf = %q, want the innermost %q", got, "vmaas")
	}
	if got := messages.ClassOf(outer); got != messages.ErrorClass_ERROR_CLASS_TRANSIENT {
		t.Fatalf("class %v, want transient", got)
	}
	if got := messages.DependencyOf(fmt.Errorf("x: %w", context.DeadlineExceeded)); got != "" {
		t.Fatalf("unnamed dependency = %q, want empty", got)
	}
	if messages.FailedIn("database", nil) != nil {
		t.Fatal("FailedIn(nil) is not nil")
	}
}

func TestSkipReasonSurvivesWrapping(t *testing.T) {
	err := fmt.Errorf("host h: %w", messages.Skip(messages.Reason("reporter not allowed"), "reporter yupana"))
	r, ok := messages.SkipReasonOf(err)
	if !ok || r != messages.Reason("reporter not allowed") {
		t.Fatalf("SkipReasonOf = %q, %v", r, ok)
	}
	if _, ok := messages.SkipReasonOf(messages.Permanent(errors.New("bad"))); ok {
		t.Fatal("a permanent failure reads as skipped")
	}
}
