package loadgen

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/platform"
)

func smallOptions() Options {
	o := DefaultOptions()
	o.Hosts, o.Events, o.BadShare, o.SkipShare, o.IDOnlyShare, o.DeleteShare = 40, 300, 0.1, 0.05, 0.1, 0.1
	o.Shape = platform.ProfileShape{Packages: 30, Repos: 8}
	o.TooLargeBytes = 30000
	o.Bulk = false
	return o
}

// Every message of a plan decodes as intended: good ones validate, each bad
// one fails with exactly the reason of its kind, each filtered one is a skip
// with the reason of its kind, and a host without packages is valid.
func TestRenderedMessagesMatchTheirKind(t *testing.T) {
	o := smallOptions()
	ds := platform.NewDataset(o.Seed, platform.DatasetSize{Packages: 300, Repos: 20, Advisories: 100})
	plan := NewPlan(o)
	vopts := inventory.DefaultValidationOptions()
	vopts.MaxMessageBytes = 20000 // below TooLargeBytes, above every other message here
	if got, want := plan.BadCount(), int(float64(o.Events)*o.BadShare+0.5); got != want {
		t.Fatalf("%d bad messages, want %d", got, want)
	}
	if got, want := plan.SkipCount(), int(float64(o.Events)*o.SkipShare+0.5); got != want {
		t.Fatalf("%d messages to skip, want %d", got, want)
	}
	seen := map[BadKind]bool{}
	skips := map[SkipKind]int{}
	for i, it := range plan.Items {
		body, err := Render(ds, o, it)
		if err != nil {
			t.Fatal(err)
		}
		if it.Bad == BadTooLarge {
			if len(body) <= vopts.MaxMessageBytes {
				t.Fatalf("too-large message is only %d bytes", len(body))
			}
		} else if it.Bad == "" && len(body) > vopts.MaxMessageBytes {
			t.Fatalf("item %d: a good message of %d bytes would be refused", i, len(body))
		}
		ev, err := inventory.DecodeInventoryEvent(body, vopts)
		if err == nil && ev.Type != inventory.EventDelete {
			err = inventory.CheckEventTime(ev.Timestamp, time.Now(), vopts) // the handler's next check
		}
		if it.Skip != "" {
			skips[it.Skip]++
			if it.Skip == SkipNoPackages {
				if err != nil || ev.HostID() != it.Key || len(ev.Host.SystemProfile.InstalledPackages) != 0 {
					t.Fatalf("item %d: a host without packages must be valid and empty: %v", i, err)
				}
				continue
			}
			if reason, ok := messages.SkipReasonOf(err); !ok || string(reason) != string(it.Skip) {
				t.Fatalf("item %d: skip kind %q gave %v", i, it.Skip, err)
			}
			continue
		}
		if it.Bad == "" {
			if err != nil {
				t.Fatalf("item %d (%s): %v", i, it.Event.Type, err)
			}
			if ev.HostID() != it.Key || string(ev.Type) != it.Event.Type {
				t.Fatalf("item %d: host %s type %s, want %s %s", i, ev.HostID(), ev.Type, it.Key, it.Event.Type)
			}
			continue
		}
		var ve *messages.ValidationError
		if !errors.As(err, &ve) || string(ve.Reason) != string(it.Bad) {
			t.Fatalf("item %d: bad kind %q gave %v", i, it.Bad, err)
		}
		seen[it.Bad] = true
	}
	if len(seen) != len(BadKinds) {
		t.Fatalf("only %d of %d bad kinds produced", len(seen), len(BadKinds))
	}
	if len(skips) != len(SkipKinds) || !maps.Equal(skips, plan.Skipped) {
		t.Fatalf("skip kinds produced %v, the plan counts %v", skips, plan.Skipped)
	}
}

// The kinds are the listener's reasons: each bad kind a validation reason,
// each skip kind a skip reason, every validation reason of an event
// produced. A key or headers too large (inventory.CheckRecord) are the
// record's, not the event's that loadgen renders: bench scenario 10 sends
// them to the listener end to end.
func TestKindsAreListenerReasons(t *testing.T) {
	var bad []string
	for _, k := range BadKinds {
		bad = append(bad, string(k))
	}
	var reasons []string
	for _, r := range inventory.ValidationReasons() {
		if r == inventory.ReasonKeyTooLarge || r == inventory.ReasonHeadersTooLarge {
			continue
		}
		reasons = append(reasons, string(r))
	}
	slices.Sort(bad)
	slices.Sort(reasons)
	if !slices.Equal(bad, reasons) {
		t.Errorf("bad kinds %q, validation reasons %q", bad, reasons)
	}
	for _, k := range SkipKinds {
		if !slices.Contains(inventory.SkipReasons(), messages.Reason(k)) {
			t.Errorf("skip kind %q is not a skip reason", k)
		}
	}
}

// A host whose only event is skipped is expected absent when filtered, and
// stored without packages when it had none.
func TestExpectedStateOfSkippedHosts(t *testing.T) {
	plan := NewPlan(smallOptions())
	n := 0
	for _, it := range plan.Items {
		if it.Skip == "" {
			continue
		}
		n++
		st := plan.Expected[it.Key]
		switch {
		case st == nil:
			t.Fatalf("host %s of a %q message has no expected state", it.Key, it.Skip)
		case it.Skip == SkipNoPackages && (!st.NoPackages || st.Filtered || st.Deleted || !st.EventTime.Equal(it.Event.Timestamp)):
			t.Fatalf("host without packages: expected %+v", st)
		case it.Skip != SkipNoPackages && (!st.Filtered || st.NoPackages || st.Deleted):
			t.Fatalf("filtered host (%s): expected %+v", it.Skip, st)
		}
	}
	if n == 0 || n != plan.SkipCount() {
		t.Fatalf("%d skipped items, the plan counts %d", n, plan.SkipCount())
	}
}

// The expected state is the last good event of each host, and each host's
// events are in time order.
func TestExpectedStateIsLastEventPerHost(t *testing.T) {
	plan := NewPlan(smallOptions())
	last := map[string]platform.EventSpec{}
	for _, it := range plan.Items {
		if it.Bad != "" || it.Skip != "" {
			continue
		}
		if prev, ok := last[it.Key]; ok && !it.Event.Timestamp.After(prev.Timestamp) {
			t.Fatalf("host %s: events out of time order", it.Key)
		}
		if prev, ok := last[it.Key]; ok && prev.Type == "delete" {
			t.Fatalf("host %s has events after its delete", it.Key)
		}
		last[it.Key] = it.Event
	}
	deleted := 0
	for id, ev := range last {
		st := plan.Expected[id]
		if st == nil || !st.EventTime.Equal(ev.Timestamp) || st.Deleted != (ev.Type == "delete") {
			t.Fatalf("host %s: expected %+v, last event %+v", id, st, ev)
		}
		if st.Deleted {
			deleted++
			continue
		}
		if want := map[bool]int{true: 0, false: ev.Revision}[ev.IDOnly]; st.Revision != want {
			t.Fatalf("host %s: revision %d, want %d", id, st.Revision, want)
		}
	}
	if deleted == 0 || len(last)+plan.SkipCount() != len(plan.Expected) {
		t.Fatalf("%d deleted, %d hosts with events, %d skipped, %d expected", deleted, len(last), plan.SkipCount(), len(plan.Expected))
	}
}
