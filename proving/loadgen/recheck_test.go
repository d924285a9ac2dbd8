package loadgen

import (
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/proving/platform"
)

func recheckOptions() Options {
	o := DefaultOptions()
	o.Hosts, o.Events = 200, 4200
	o.BadShare, o.SkipShare, o.IDOnlyShare, o.DeleteShare = 0, 0, 0, 0
	o.RecheckShare, o.ChangeShare = 0.8, 0.2
	o.Shape = platform.ProfileShape{Packages: 40, Repos: 8}
	o.Bulk = false
	return o
}

// After each host's created event, the later events split by the shares:
// re-check-ins with the profile unchanged, with a few packages changed, and
// (the rest) the next revision; the plan counts them as its items say.
func TestRecheckShares(t *testing.T) {
	for _, c := range []struct{ recheck, change float64 }{{0.8, 0.2}, {0.5, 0.1}, {0, 0}} {
		o := recheckOptions()
		o.RecheckShare, o.ChangeShare = c.recheck, c.change
		plan := NewPlan(o)
		counts := map[RecheckKind]int{}
		created, later := 0, 0
		for _, it := range plan.Items {
			switch {
			case it.Event.Type == "created":
				created++
				if it.Recheck != "" {
					t.Fatalf("a created event re-checks in: %+v", it)
				}
			default:
				later++
				counts[it.Recheck]++
			}
		}
		if created != o.Hosts || later != o.Events-o.Hosts {
			t.Fatalf("%d created, %d later events; want %d and %d", created, later, o.Hosts, o.Events-o.Hosts)
		}
		rechecks := maps.Clone(counts)
		delete(rechecks, "") // next revisions: not re-check-ins
		if !maps.Equal(plan.Rechecks, rechecks) {
			t.Fatalf("the plan counts %v, its items %v", plan.Rechecks, counts)
		}
		for kind, want := range map[RecheckKind]float64{RecheckRepeat: c.recheck, RecheckChange: c.change, "": 1 - c.recheck - c.change} {
			if got := float64(counts[kind]) / float64(later); math.Abs(got-want) > 0.03 {
				t.Errorf("shares %v/%v: %q is %.3f of the later events, want %.2f", c.recheck, c.change, kind, got, want)
			}
		}
	}
}

// The same options give the same plan; another seed another one.
func TestRecheckPlanIsDeterministic(t *testing.T) {
	o := recheckOptions()
	a, b := NewPlan(o), NewPlan(o)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same options, different plans")
	}
	o.Seed++
	if c := NewPlan(o); reflect.DeepEqual(a.Items, c.Items) {
		t.Fatal("another seed, the same plan")
	}
}

// A re-check-in repeats what the host has (its revision and changes) with a
// later timestamp, a change adds one small change to it, a next revision
// drops the changes; the expected state is the last event's, and the
// rendered events carry exactly the packages the checker will expect.
func TestExpectedStateAfterRepeatsAndChanges(t *testing.T) {
	o := recheckOptions()
	o.Hosts, o.Events = 60, 600
	o.RecheckShare, o.ChangeShare = 0.6, 0.3 // a tenth are next revisions
	ds := platform.NewDataset(o.Seed, platform.DatasetSize{Packages: 300, Repos: 20, Advisories: 100})
	plan := NewPlan(o)
	packagesOf := func(it Item) []string {
		t.Helper()
		body, err := Render(ds, o, it)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := inventory.DecodeInventoryEvent(body, inventory.DefaultValidationOptions())
		if err != nil {
			t.Fatal(err)
		}
		out := slices.Clone(ev.Host.SystemProfile.InstalledPackages)
		slices.Sort(out)
		return out
	}
	last := map[string]Item{}
	seen := map[RecheckKind]int{}
	for _, it := range plan.Items {
		prev, ok := last[it.Key]
		last[it.Key] = it
		if !ok {
			continue
		}
		if !it.Event.Timestamp.After(prev.Event.Timestamp) {
			t.Fatalf("host %s: a later event without a later timestamp", it.Key)
		}
		was, now := prev.Event, it.Event
		seen[it.Recheck]++
		switch it.Recheck {
		case RecheckRepeat:
			if now.Revision != was.Revision || now.Changes != was.Changes {
				t.Fatalf("host %s: a repeat carries %d/%d after %d/%d", it.Key, now.Revision, now.Changes, was.Revision, was.Changes)
			}
			if seen[RecheckRepeat] <= 20 && !slices.Equal(packagesOf(it), packagesOf(prev)) {
				t.Fatalf("host %s: a repeat renders other packages than the event before it", it.Key)
			}
		case RecheckChange:
			if now.Revision != was.Revision || now.Changes != was.Changes+1 {
				t.Fatalf("host %s: a change carries %d/%d after %d/%d", it.Key, now.Revision, now.Changes, was.Revision, was.Changes)
			}
			if seen[RecheckChange] <= 20 && slices.Equal(packagesOf(it), packagesOf(prev)) {
				t.Fatalf("host %s: a change renders the same packages as the event before it", it.Key)
			}
		default:
			if now.Revision <= was.Revision || now.Changes != 0 {
				t.Fatalf("host %s: a next revision carries %d/%d after %d/%d", it.Key, now.Revision, now.Changes, was.Revision, was.Changes)
			}
		}
	}
	if seen[RecheckRepeat] == 0 || seen[RecheckChange] == 0 || seen[""] == 0 {
		t.Fatalf("kinds seen %v", seen)
	}
	withChanges := 0
	for id, it := range last {
		st := plan.Expected[id]
		if st.Revision != it.Event.Revision || st.Changes != it.Event.Changes || !st.EventTime.Equal(it.Event.Timestamp) || st.Deleted {
			t.Fatalf("host %s: expected %+v, last event %+v", id, st, it.Event)
		}
		if got, want := packagesOf(it), ds.ProfileAt(id, st.Revision, st.Changes, o.Shape).Packages; !slices.Equal(got, want) {
			t.Fatalf("host %s: the last event carries %d packages, the expected state %d (or they differ)", id, len(got), len(want))
		}
		if st.Changes > 0 {
			withChanges++
		}
	}
	if withChanges == 0 {
		t.Fatal("no host ends with a change: the test checks nothing of them")
	}
}

// The shares are settings; together they may not pass 1.
func TestRecheckSettings(t *testing.T) {
	env := map[string]string{"KAFKA_BROKERS": "127.0.0.1:1", "LOADGEN_RECHECK_SHARE": "0.8"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, _, err := Parse([]string{"-change-share", "0.2"}, lookup)
	if err != nil || cfg.Options.RecheckShare != 0.8 || cfg.Options.ChangeShare != 0.2 {
		t.Fatalf("%+v %v", cfg, err)
	}
	if _, _, err := Parse([]string{"-change-share", "0.3"}, lookup); err == nil || !strings.Contains(err.Error(), "more than 1") {
		t.Fatalf("shares of 1.1 accepted: %v", err)
	}
}
