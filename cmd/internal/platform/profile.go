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
