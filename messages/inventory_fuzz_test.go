package messages_test

import (
	"errors"
	"testing"

	"github.com/patchflow/patchflow/messages"
)

// FuzzDecodeInventoryEvent checks the contract the listener relies on for
// arbitrary Kafka input: no panic, and either a valid event or a permanent
// *ValidationError, never both or neither. More seeds live in
// testdata/fuzz/FuzzDecodeInventoryEvent.
func FuzzDecodeInventoryEvent(f *testing.F) {
	f.Add(encode(f, createdEvent()))
	f.Add(encode(f, updatedEvent()))
	f.Add(encode(f, deleteEvent()))
	f.Add(encode(f, idOnlyEvent()))
	f.Add(encode(f, createdEvent())[:300])
	f.Add([]byte(`{"type":"created","host":{"id":"8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b","org_id":"o","reporter":"puptoo","system_profile":{"installed_packages":["a-1:2-3.x"]}}}`))
	f.Add([]byte(`{"type":"created","host":{"id":1}}`))
	f.Add([]byte(`{"type":"delete","id":"8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b","org_id":"o","timestamp":"not a time"}`))
	f.Add([]byte(`{"type":["created"]}`))
	f.Add([]byte(`{"type":"updated","host":{"system_profile":{"installed_packages":"kernel"}}}`))
	f.Add([]byte(`{"type":"created","host":{"id":"8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b","org_id":"o","per_reporter_staleness":{"puptoo":{"last_check_in":"2024-01-01T00:00:00Z"}},"tags":null}}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))

	opts := messages.DefaultValidationOptions()
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := messages.DecodeInventoryEvent(data, opts)
		if err != nil {
			if ev != nil {
				t.Fatalf("event %+v returned with error %v", ev, err)
			}
			if c := messages.ClassOf(err); c != messages.ErrorClass_ERROR_CLASS_PERMANENT {
				t.Fatalf("ClassOf(%v) = %v, want permanent", err, c)
			}
			var ve *messages.ValidationError
			if !errors.As(err, &ve) || ve.Reason == "" {
				t.Fatalf("%v is not a *ValidationError with a reason", err)
			}
			return
		}
		if ev == nil {
			t.Fatal("nil event and nil error")
		}
		switch ev.Type {
		case messages.EventDelete:
			if ev.Host != nil {
				t.Fatalf("delete with a host: %+v", ev.Host)
			}
		case messages.EventCreated, messages.EventUpdated:
			if ev.Host == nil {
				t.Fatal("created or updated without a host")
			}
		default:
			t.Fatalf("accepted type %q", ev.Type)
		}
		if ev.HostID() == "" || ev.OrgID() == "" {
			t.Fatalf("accepted without ids: host %q org %q", ev.HostID(), ev.OrgID())
		}
		if ev.Host != nil && ev.Host.SystemProfile != nil {
			pkgs, err := messages.ParsedPackages(ev.Host.SystemProfile)
			if err != nil || len(pkgs) == 0 {
				t.Fatalf("accepted profile whose packages do not parse: %d, %v", len(pkgs), err)
			}
		}
	})
}
