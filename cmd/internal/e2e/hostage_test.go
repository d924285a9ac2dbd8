package e2e

import (
	"strings"
	"testing"

	"github.com/patchflow/patchflow/messages"
)

// A hostage's dead letter must say, in the envelope's reason, that its own
// transient failures decided: the class alone is not enough, an envelope
// that lost its reason is the listener's defect.
func TestHostageLettersNeedTheTransientReason(t *testing.T) {
	letter := func(reason string) deadLetter {
		return deadLetter{reason: reason, letter: &messages.DeadLetter{
			Key: []byte("host-1"), ErrorClass: messages.ErrorClass_ERROR_CLASS_TRANSIENT, OwnFailures: 5,
			History: []*messages.FailedAttempt{{Attempt: 1, Dependency: messages.DependencyVMaaS}}}}
	}
	if problems := judgeHostageLetters([]deadLetter{letter(string(messages.ReasonTransient))}, []string{"host-1"}, 1, 5); len(problems) != 0 {
		t.Fatalf("a hostage's transient dead letter: %v", problems)
	}
	for _, reason := range []string{"(no reason in the envelope)", string(messages.ReasonUnknown)} {
		problems := judgeHostageLetters([]deadLetter{letter(reason)}, []string{"host-1"}, 1, 5)
		if len(problems) != 1 || !strings.Contains(problems[0], reason) {
			t.Errorf("reason %q: problems %v, want one naming it", reason, problems)
		}
	}
}
