package telemetry

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

type noDeadLetters struct{}

func (noDeadLetters) Write(context.Context, *messages.DeadLetter) error { return nil }

// newIdleBridge is a bridge that has joined no group and claimed nothing,
// closed with its actor system when the test ends.
func newIdleBridge(t *testing.T) *actors.Bridge {
	t.Helper()
	system := actors.NewActorSystem(slog.New(slog.DiscardHandler))
	t.Cleanup(system.Shutdown)
	b, err := actors.NewBridge(actors.BridgeConfig{System: system, Settings: actors.DefaultSettings(),
		Handler: actors.HandlerFunc(func(context.Context, *messages.Record) error { return nil }), DeadLetters: noDeadLetters{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// Before the first claim (or after every partition was revoked) and without
// settings, /status.json has empty lists, not null; every dead-letter reason
// is in the totals from the start, as on /metrics.
func TestStatusJSONBeforeAnyClaim(t *testing.T) {
	b := newIdleBridge(t)
	validation := []messages.Reason{"missing org id", "malformed JSON"}
	_, js := StatusHandlers(&Readiness{Bridge: b}, nil, validation)
	rec := httptest.NewRecorder()
	js.ServeHTTP(rec, httptest.NewRequest("GET", "/status.json", nil))
	body := rec.Body.String()
	for _, want := range []string{`"partitions":[]`, `"settings":[]`} {
		if !strings.Contains(body, want) {
			t.Errorf("no partitions claimed: want %s in %s", want, body)
		}
	}
	var st Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if got, want := len(st.Totals.DeadLetteredByReason), len(messages.DeadLetterReasons())+len(validation); got != want {
		t.Errorf("dead_lettered_by_reason %v before any dead letter; want every one of the %d reasons at 0", st.Totals.DeadLetteredByReason, want)
	}
}
