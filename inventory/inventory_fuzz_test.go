package inventory_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
)

// FuzzDecodeInventoryEvent checks the contract the listener relies on for
// arbitrary Kafka input: no panic, and exactly one of a valid event, a
// permanent *ValidationError (broken: dead-lettered) or a filter's *Skipped
// (committed and counted, never dead-lettered), never an event with an
// error. More seeds live in testdata/fuzz/FuzzDecodeInventoryEvent.
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
	f.Add([]byte(`{"type":"updated","host":{"id":"8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b","org_id":"o","reporter":"yupana","system_profile":{}}}`))
	f.Add([]byte(`{"type":"created","host":{"id":"8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b","org_id":"o","reporter":"puptoo","system_profile":{"host_type":"edge","installed_packages":["x"]}}}`))
	f.Add([]byte(`{"type":"created","host":{"id":"8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b","org_id":"o","reporter":"puptoo","system_profile":{"installed_packages":[]}}}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))

	opts := inventory.DefaultValidationOptions()
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := inventory.DecodeInventoryEvent(data, opts)
		if err != nil {
			if ev != nil {
				t.Fatalf("event %+v returned with error %v", ev, err)
			}
			if reason, skipped := messages.SkipReasonOf(err); skipped {
				var ve *messages.ValidationError
				if errors.As(err, &ve) || messages.ClassOf(err) == messages.ErrorClass_ERROR_CLASS_PERMANENT {
					t.Fatalf("%v is both skipped and broken", err)
				}
				if reason != inventory.ReasonReporterNotAllowed && reason != inventory.ReasonExcludedHostType {
					t.Fatalf("the decoder skipped for %q, which is not one of its filters", reason)
				}
				return
			}
			if c := messages.ClassOf(err); c != messages.ErrorClass_ERROR_CLASS_PERMANENT {
				t.Fatalf("ClassOf(%v) = %v, want permanent", err, c)
			}
			var ve *messages.ValidationError
			if !errors.As(err, &ve) || !slices.Contains(inventory.ValidationReasons(), ve.Reason) {
				t.Fatalf("%v is not a *ValidationError with one of ValidationReasons", err)
			}
			return
		}
		if ev == nil {
			t.Fatal("nil event and nil error")
		}
		switch ev.Type {
		case inventory.EventDelete:
			if ev.Host != nil {
				t.Fatalf("delete with a host: %+v", ev.Host)
			}
		case inventory.EventCreated, inventory.EventUpdated:
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
			p := ev.Host.SystemProfile
			pkgs, err := inventory.ParsedPackages(p)
			if err != nil || len(pkgs) != len(p.InstalledPackages) { // none at all is valid: nothing to evaluate
				t.Fatalf("accepted profile whose packages do not parse: %d of %d, %v", len(pkgs), len(p.InstalledPackages), err)
			}
			if slices.Contains(opts.ExcludedHostTypes, p.HostType) {
				t.Fatalf("accepted an excluded host type %q", p.HostType)
			}
			if !slices.Contains(opts.AllowedReporters, ev.Host.Reporter) {
				t.Fatalf("accepted a profile from reporter %q", ev.Host.Reporter)
			}
		}
	})
}
