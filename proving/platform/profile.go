package platform

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
)

// Repo is a yum repository as a host reports it.
type Repo struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	BaseURL string `json:"base_url"`
}

// Module is an enabled dnf module stream.
type Module struct {
	Name   string `json:"name"`
	Stream string `json:"stream"`
}

// Profile is the part of a host's system profile the listener uses.
type Profile struct {
	HostID      string
	Packages    []string // canonical NEVRAs, sorted
	Repos       []Repo
	Modules     []Module
	OSMinor     int
	RHSMVersion string
}

// EnabledRepos returns the ids of the enabled repositories, sorted.
func (p Profile) EnabledRepos() []string {
	var out []string
	for _, r := range p.Repos {
		if r.Enabled {
			out = append(out, r.ID)
		}
	}
	slices.Sort(out)
	return out
}

// ProfileShape chooses how large generated profiles are.
type ProfileShape struct {
	Packages int // installed packages (real hosts: about 400)
	Repos    int // yum repositories (real hosts: about 150)
}

// DefaultShape is the size of a real host's profile.
func DefaultShape() ProfileShape { return ProfileShape{Packages: 400, Repos: 150} }

func hostSeed(seed uint64, hostID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(hostID))
	return h.Sum64() ^ seed
}

// Profile returns the profile of hostID at revision (0 = as first
// registered; each later revision has updated a few packages). It is a pure
// function of the dataset's seed, the host id, the revision and the shape:
// loadgen, the mock inventory service and checkers all derive the same one.
func (d *Dataset) Profile(hostID string, revision int, shape ProfileShape) Profile {
	return d.ProfileAt(hostID, revision, 0, shape)
}

// ChangeMaxPackages is the most packages one small change touches.
const ChangeMaxPackages = 5

// ProfileAt is Profile after changes small changes on top of revision, as a
// host that re-checks in with a few packages changed reports: change c
// (1, 2, ...) touches 1 to ChangeMaxPackages packages, each bumped to its
// next build, removed, or added (a dataset package the host lacks, at one of
// its builds), a package at most once per change. Every package stays one
// of the dataset's builds, so the VMaaS answer (computed from the package
// list alone) and Evaluate agree on any change. Only the package list
// changes; it is a pure function of the same inputs and changes.
func (d *Dataset) ProfileAt(hostID string, revision, changes int, shape ProfileShape) Profile {
	p := d.profile(hostID, revision, shape)
	hs := hostSeed(d.Seed, hostID)
	for c := 1; c <= changes; c++ {
		p.Packages = d.change(p.Packages, hs, c)
	}
	return p
}

// change applies change c to packages (sorted NEVRAs) and returns them
// sorted.
func (d *Dataset) change(packages []string, hs uint64, c int) []string {
	rng := rand.New(rand.NewPCG(hs, 0xc4a1<<32|uint64(c)))
	out := slices.Clone(packages)
	installed := map[string]int{} // name -> index in out
	for i, nevra := range out {
		name, _, _ := splitNEVRA(nevra)
		installed[name] = i
	}
	touched := map[string]bool{}
	// untouched returns the index of an installed package this change has
	// not touched yet, from a random start (-1: none).
	untouched := func(ok func(name string, v int) bool) int {
		start := rng.IntN(max(1, len(out)))
		for k := range out {
			i := (start + k) % len(out)
			name, evra, _ := splitNEVRA(out[i])
			if !touched[name] && ok(name, d.index[name][evra]) {
				return i
			}
		}
		return -1
	}
	for range 1 + rng.IntN(ChangeMaxPackages) {
		switch op := rng.IntN(10); {
		case op < 6: // a newer build
			i := untouched(func(name string, v int) bool { return v+1 < len(d.byName[name].Versions) })
			if i < 0 {
				continue
			}
			name, evra, _ := splitNEVRA(out[i])
			out[i] = name + "-" + d.byName[name].Versions[d.index[name][evra]+1].EVRA
			touched[name] = true
		case op < 8 && len(out) > 1: // removed
			i := untouched(func(string, int) bool { return true })
			if i < 0 {
				continue
			}
			name, _, _ := splitNEVRA(out[i])
			touched[name] = true
			last := len(out) - 1
			out[i] = out[last]
			out = out[:last]
			if i < last {
				moved, _, _ := splitNEVRA(out[i])
				installed[moved] = i
			}
			delete(installed, name)
		default: // added
			if len(installed) >= len(d.Packages) {
				continue
			}
			start := rng.IntN(len(d.Packages))
			for k := range d.Packages {
				spec := &d.Packages[(start+k)%len(d.Packages)]
				if _, has := installed[spec.Name]; has || touched[spec.Name] {
					continue
				}
				out = append(out, spec.Name+"-"+spec.Versions[rng.IntN(len(spec.Versions))].EVRA)
				installed[spec.Name], touched[spec.Name] = len(out)-1, true
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func (d *Dataset) profile(hostID string, revision int, shape ProfileShape) Profile {
	hs := hostSeed(d.Seed, hostID)
	rng := rand.New(rand.NewPCG(hs, 1))
	n := min(shape.Packages, len(d.Packages))
	picks := rng.Perm(len(d.Packages))[:n]
	p := Profile{HostID: hostID, OSMinor: rng.IntN(10), RHSMVersion: fmt.Sprintf("1.28.%d", rng.IntN(40))}
	for i, pi := range picks {
		spec := &d.Packages[pi]
		v := len(spec.Versions) - 1 // half the packages are current,
		if rng.IntN(2) == 0 {
			v = rng.IntN(max(1, len(spec.Versions)-1)) // the rest behind
		}
		for r := 1; r <= revision; r++ {
			if bumped(hs, i, r) {
				v++
			}
		}
		v = min(v, len(spec.Versions)-1)
		p.Packages = append(p.Packages, spec.Name+"-"+spec.Versions[v].EVRA)
	}
	slices.Sort(p.Packages)

	repoOrder := rng.Perm(len(d.Repos) - 2)
	p.Repos = append(p.Repos, repo(d.Repos[0], true), repo(d.Repos[1], true))
	for _, ri := range repoOrder[:min(max(0, shape.Repos-2), len(repoOrder))] {
		p.Repos = append(p.Repos, repo(d.Repos[ri+2], rng.IntN(10) < 8))
	}
	if rng.IntN(2) == 0 {
		p.Modules = append(p.Modules, Module{Name: "nodejs", Stream: fmt.Sprint(16 + 2*rng.IntN(3))})
	}
	if rng.IntN(3) == 0 {
		p.Modules = append(p.Modules, Module{Name: "postgresql", Stream: fmt.Sprint(12 + rng.IntN(4))})
	}
	return p
}

// bumped says whether package i of a host is updated at revision r (about
// one package in twenty per revision).
func bumped(hs uint64, i, r int) bool {
	x := hs ^ uint64(i)*0x9e3779b97f4a7c15 ^ uint64(r)*0xc2b2ae3d27d4eb4f
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return x%20 == 0
}

func repo(id string, enabled bool) Repo {
	return Repo{ID: id, Name: "Repository " + id, Enabled: enabled, BaseURL: "https://cdn.example.com/content/dist/rhel8/8/x86_64/" + id + "/os"}
}
