package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// schema compiles one of testdata/schemas, formats asserted.
func schema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile("testdata/schemas/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, msg []byte) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(msg)))
	if err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
	if err := s.Validate(doc); err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
}

const effectsHost = "8a3f1c2e-0000-4000-8000-0000000000e1"

// The remediation message has the remediations service's shape: the host
// id, each advisory and each package's newest installable update, prefixed
// and sorted, as the relay renders it from what the store wrote. An update
// VMaaS names in the canonical form is stored by reference; one named any
// other way (here without its epoch) is carried as VMaaS wrote it.
func TestRemediationMessageShape(t *testing.T) {
	ctx := context.Background()
	store, err := persistence.Open(ctx, pgtest.URL(t), persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	outbox, err := store.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer outbox.Close()
	h := &Handler{effects: EffectsOptions{Remediations: true}}
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for i, tc := range []struct {
		update string
		want   []string
	}{
		{"bash-0:5.1-3.el9.x86_64", []string{"patch:RHBA-2026:0003", "patch:RHSA-2026:0002", "patch:RHSA-2026:0004", "patch:bash-0:5.1-3.el9.x86_64"}},
		{"bash-5.1-3.el9.x86_64", []string{"patch:RHBA-2026:0003", "patch:RHSA-2026:0002", "patch:RHSA-2026:0004", "patch:bash-5.1-3.el9.x86_64"}},
	} {
		host := fmt.Sprintf("8a3f1c2e-0000-4000-8000-0000000000f%d", i)
		resp := &clients.UpdatesResponse{UpdateList: map[string]clients.PackageUpdates{
			"bash-0:5.1-1.el9.x86_64": {AvailableUpdates: []clients.Update{
				{Package: "bash-0:5.1-2.el9.x86_64", Erratum: "RHSA-2026:0002", Repository: "baseos"},
				{Package: tc.update, Erratum: "RHBA-2026:0003", Repository: "baseos"},
				{Package: "bash-0:5.1-4.el9.x86_64", Erratum: "RHSA-2026:0004", Repository: "elsewhere"}}},
		}}
		ev := &inventory.InventoryEvent{Type: inventory.EventCreated, Host: &inventory.Host{ID: host, OrgID: "org-1"}}
		u := persistence.SystemUpload{OrgID: "org-1", InventoryID: host, EventTime: at, LastUpload: at, Reporter: "puptoo", Arch: "x86_64",
			Packages: []persistence.Package{{Name: "bash", EVRA: "0:5.1-1.el9.x86_64"}}}
		e := Classify(resp, []string{"baseos"})
		e.Effects = h.evaluationEffects(ev, answer{Evaluation: e, updates: installableUpdates(resp, []string{"baseos"})}, nil)
		check, err := store.CheckUpload(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.StoreEvaluatedSystem(ctx, u, e, check); err != nil {
			t.Fatal(err)
		}
		msgs, finish, err := outbox.Claim(ctx, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || msgs[0].Kind != messages.OutboxRemediation {
			t.Fatalf("%s: claimed %+v, want its remediation", tc.update, msgs)
		}
		if err := finish(ctx, messages.OutboxOutcome{Published: []int64{msgs[0].ID}}); err != nil {
			t.Fatal(err)
		}
		validate(t, schema(t, "remediation-updates.json"), msgs[0].Value)
		var r persistence.RemediationMessage
		if err := json.Unmarshal(msgs[0].Value, &r); err != nil {
			t.Fatal(err)
		}
		if r.HostID != host || strings.Join(r.Issues, " ") != strings.Join(tc.want, " ") {
			t.Fatalf("%s: message %s, want host %s, issues %v", tc.update, msgs[0].Value, host, tc.want)
		}
		// A function of the evaluation: the same evaluation again writes
		// no message.
		u.EventTime = at.Add(time.Minute)
		if check, err = store.CheckUpload(ctx, u); err != nil {
			t.Fatal(err)
		}
		if _, err := store.StoreEvaluatedSystem(ctx, u, e, check); err != nil {
			t.Fatal(err)
		}
		again, finish, err := outbox.Claim(ctx, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := finish(ctx, messages.OutboxOutcome{}); err != nil {
			t.Fatal(err)
		}
		if len(again) != 0 {
			t.Fatalf("%s: the same evaluation again wrote %+v", tc.update, again)
		}
	}
}

// Payload statuses have the payload tracker's shape; the final one's id is
// the same for success and error, and differs from received's.
func TestPayloadStatusShape(t *testing.T) {
	s := schema(t, "payload-status.json")
	at := time.Date(2026, 12, 5, 10, 0, 0, 123456789, time.UTC)
	received := payloadStatus("org-1", "req-1", effectsHost, StatusReceived, "", at)
	success := payloadStatus("org-1", "req-1", effectsHost, StatusSuccess, "", at)
	failed := payloadStatus("org-1", "req-1", effectsHost, StatusError, "unparsable package", at)
	for _, m := range []persistence.Message{received, success, failed} {
		validate(t, s, m.Value)
	}
	if success.EventID != failed.EventID || received.EventID == success.EventID {
		t.Fatalf("ids: received %s, success %s, error %s", received.EventID, success.EventID, failed.EventID)
	}
	if again := payloadStatus("org-1", "req-1", effectsHost, StatusReceived, "", at.Add(time.Hour)); again.EventID != received.EventID {
		t.Fatalf("a redelivery's received has another id: %s, %s", again.EventID, received.EventID)
	}
}

// The notification the store writes has the platform's v1.1.0 shape, each
// event the patch application's payload.
func TestNotificationShape(t *testing.T) {
	ctx := context.Background()
	store, err := persistence.Open(ctx, pgtest.URL(t), persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ev := &inventory.InventoryEvent{Type: inventory.EventCreated, Host: &inventory.Host{ID: effectsHost, OrgID: "org-1", DisplayName: "web-1",
		SystemProfile: &inventory.SystemProfile{OperatingSystem: &inventory.OperatingSystem{Name: "RHEL", Major: 9, Minor: 4}}}}
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	u := persistence.SystemUpload{OrgID: "org-1", InventoryID: effectsHost, EventTime: at, LastUpload: at, Reporter: "puptoo", Arch: "x86_64",
		Packages: []persistence.Package{{Name: "bash", EVRA: "0:5.1-1.el9.x86_64"}}}
	e := persistence.Evaluation{Advisories: []persistence.AdvisoryResult{
		{Name: "RHSA-2026:0002", Type: "security", Status: persistence.Installable},
		{Name: "RHBA-2026:0003", Type: "bugfix", Status: persistence.Installable}}}
	h := &Handler{effects: EffectsOptions{Notifications: true}}
	e.Effects = h.evaluationEffects(ev, answer{Evaluation: e}, nil)
	check, err := store.CheckUpload(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.StoreEvaluatedSystem(ctx, u, e, check); err != nil {
		t.Fatal(err)
	}
	var payload, eventID string
	if err := store.DB().QueryRow(`SELECT payload, event_id::text FROM outbox WHERE kind = 'notification'`).Scan(&payload, &eventID); err != nil {
		t.Fatal(err)
	}
	validate(t, schema(t, "notification-v1.1.0.json"), []byte(payload))
	var n struct {
		ID          string `json:"id"`
		Bundle      string `json:"bundle"`
		Application string `json:"application"`
		EventType   string `json:"event_type"`
		Context     struct {
			InventoryID string `json:"inventory_id"`
			RHELVersion string `json:"rhel_version"`
		} `json:"context"`
		Events []struct {
			Payload json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(payload), &n); err != nil {
		t.Fatal(err)
	}
	if n.ID != eventID || n.Bundle != "rhel" || n.Application != "patch" || n.EventType != "new-advisory" || n.Context.InventoryID != effectsHost ||
		n.Context.RHELVersion != "9.4" || len(n.Events) != 2 {
		t.Fatalf("notification %s (event id %s)", payload, eventID)
	}
	p := schema(t, "patch-new-advisory-payload.json")
	for _, e := range n.Events {
		validate(t, p, e.Payload)
	}
}
