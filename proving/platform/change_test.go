package platform

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
)

// names maps each package name of a sorted NEVRA list to its EVRA.
func names(t *testing.T, packages []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range packages {
		name, evra, ok := splitNEVRA(p)
		if !ok {
			t.Fatalf("%q is not a NEVRA", p)
		}
		if _, dup := out[name]; dup {
			t.Fatalf("%s installed twice", name)
		}
		out[name] = evra
	}
	return out
}

// Each small change touches 1 to ChangeMaxPackages packages (bumped to the
// next build, removed or added), leaves the rest of the profile alone, keeps
// every package one of the dataset's builds, and is the same every time;
// ProfileAt without changes is Profile.
func TestSmallChangesTouchAFewKnownPackages(t *testing.T) {
	ds := NewDataset(11, DefaultSize())
	shape := DefaultShape()
	if !reflect.DeepEqual(ds.ProfileAt(host, 2, 0, shape), ds.Profile(host, 2, shape)) {
		t.Fatal("ProfileAt with no changes differs from Profile")
	}
	kinds := map[string]int{}
	prev := ds.ProfileAt(host, 1, 0, shape)
	for c := 1; c <= 60; c++ {
		p := ds.ProfileAt(host, 1, c, shape)
		if again := ds.ProfileAt(host, 1, c, shape); !reflect.DeepEqual(p, again) {
			t.Fatalf("change %d: two calls, two profiles", c)
		}
		if !slices.IsSorted(p.Packages) {
			t.Fatalf("change %d: packages not sorted", c)
		}
		if !reflect.DeepEqual(p.Repos, prev.Repos) || !reflect.DeepEqual(p.Modules, prev.Modules) || p.OSMinor != prev.OSMinor {
			t.Fatalf("change %d changed more than the packages", c)
		}
		before, after := names(t, prev.Packages), names(t, p.Packages)
		touched := 0
		for name, evra := range after {
			spec := ds.byName[name]
			v, known := ds.index[name][evra]
			if spec == nil || !known {
				t.Fatalf("change %d: %s-%s is not a dataset build", c, name, evra)
			}
			switch was, had := before[name]; {
			case !had:
				kinds["added"]++
				touched++
			case was != evra:
				if ds.index[name][was]+1 != v {
					t.Fatalf("change %d: %s went from %s to %s, not to its next build", c, name, was, evra)
				}
				kinds["bumped"]++
				touched++
			}
		}
		for name := range before {
			if _, kept := after[name]; !kept {
				kinds["removed"]++
				touched++
			}
		}
		if touched < 1 || touched > ChangeMaxPackages {
			t.Fatalf("change %d touched %d packages, want 1 to %d", c, touched, ChangeMaxPackages)
		}
		prev = p
	}
	if kinds["added"] == 0 || kinds["bumped"] == 0 || kinds["removed"] == 0 {
		t.Fatalf("over 60 changes: %v; want every kind", kinds)
	}
	if other := ds.ProfileAt(platformOtherHost, 1, 3, shape); reflect.DeepEqual(other.Packages, ds.ProfileAt(host, 1, 3, shape).Packages) {
		t.Fatal("two hosts, same changed profile")
	}
}

const platformOtherHost = "8a3f1c2e-0000-4000-8000-000000000002"

// The mock's VMaaS answer for a changed profile agrees with Evaluate, so a
// checker computes what a listener must store after a change.
func TestUpdatesAnswerForAChangedProfileMatchesEvaluate(t *testing.T) {
	ds := NewDataset(3, DatasetSize{Packages: 300, Repos: 20, Advisories: 200})
	shape := ProfileShape{Packages: 50, Repos: 10}
	srv, err := NewServer(ds, ServerOptions{Shape: shape})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	for _, c := range []int{1, 2, 5} {
		p := ds.ProfileAt(host, 0, c, shape)
		code, body := post(t, ts.URL+"/api/v3/updates", map[string]any{"package_list": p.Packages})
		var resp updatesResponse
		if err := json.Unmarshal(body, &resp); code != 200 || err != nil {
			t.Fatalf("change %d: status %d, %v", c, code, err)
		}
		enabled := map[string]bool{}
		for _, r := range p.EnabledRepos() {
			enabled[r] = true
		}
		got := map[string]string{}
		for _, pu := range resp.UpdateList {
			for _, u := range pu.AvailableUpdates {
				switch {
				case u.Erratum == "":
				case enabled[u.Repository]:
					got[u.Erratum] = "installable"
				case got[u.Erratum] == "":
					got[u.Erratum] = "applicable"
				}
			}
		}
		want := ds.Evaluate(p.Packages, p.EnabledRepos()).Advisories
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("change %d: the answer implies %d advisories, Evaluate says %d", c, len(got), len(want))
		}
	}
}
