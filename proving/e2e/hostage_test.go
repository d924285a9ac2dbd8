package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// A hostage's dead letter must say, in the envelope's reason, that its own
// transient failures decided: the class alone is not enough, an envelope
// that lost its reason is the listener's defect.
func TestHostageLettersNeedTheTransientReason(t *testing.T) {
	letter := func(reason string) deadLetter {
		return deadLetter{reason: reason, letter: &messages.DeadLetter{
			Key: []byte("host-1"), ErrorClass: messages.ErrorClass_ERROR_CLASS_TRANSIENT, OwnFailures: 5,
			History: []*messages.FailedAttempt{{Attempt: 1, Dependency: clients.DependencyVMaaS}}}}
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

// The stream must last until every hostage record has had its own-failure
// bound with other records still flowing: produced all at once, a fast
// machine finished the rest of it before a hostage's second upload had
// failed its attempts, and that record was then retried as a shared outage
// for the rest of the run.
func TestHostageStreamOutlastsTheHostagesRecords(t *testing.T) {
	bound := 13 * time.Second
	plan := &loadgen.Plan{}
	for i := range 100 {
		plan.Items = append(plan.Items, loadgen.Item{Key: fmt.Sprintf("host-%d", i), Event: platform.EventSpec{Type: "updated"}})
	}
	// h1: two uploads, the last at 20 of 100; h2: three, the last at 10,
	// then a delete at 30 (it waits behind them, and asks no VMaaS).
	plan.Items[5].Key, plan.Items[19].Key = "h1", "h1"
	plan.Items[2].Key, plan.Items[6].Key, plan.Items[9].Key = "h2", "h2", "h2"
	plan.Items[29] = loadgen.Item{Key: "h2", Event: platform.EventSpec{Type: "delete"}}
	d, err := hostageStream(plan, []string{"h1", "h2"}, bound)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct {
		uploads int
		last    float64 // the share of the stream produced when its last message is
	}{{2, 0.20}, {3, 0.30}} {
		if end := time.Duration(h.last*float64(d)) + time.Duration(h.uploads)*bound; end+trafficAfter > d {
			t.Errorf("stream of %v: a hostage with %d uploads, its last message at %.0f %% of it, may fail until %v, too near the end", d, h.uploads, 100*h.last, end)
		}
	}
	if d > 2*(3*bound+trafficAfter) {
		t.Errorf("stream of %v: longer than the hostages need", d)
	}
	// A hostage at the end of the stream would need it to last for ever.
	plan.Items[99].Key = "h1"
	if d, err := hostageStream(plan, []string{"h1"}, bound); err == nil {
		t.Errorf("a hostage message at the end of the stream: got %v, want an error", d)
	}
}
