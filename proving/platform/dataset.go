// Package platform is a deterministic stand-in for the services the listener
// waits on: a generated advisory dataset, the VMaaS /api/v3/updates answer
// computed from it, host profiles derived from host ids, and an HTTP server
// (cmd/platform-mock) serving both with configurable latency and faults.
//
// Everything is a pure function of the seed: the same request always gets the
// same answer, so tests and checkers can compute the expected evaluation of
// any host without asking the server.
package platform

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Arch and Releasever of every generated host and package.
const (
	Arch       = "x86_64"
	Releasever = "8"
)

// Version is one build of a package in the dataset.
type Version struct {
	EVRA       string // "0:1.2.0-3.el8.x86_64"
	Erratum    string // advisory fixing the previous versions; "" for a plain update
	Repository string // repository shipping this build
}

// PackageSpec is a package and its builds, oldest first.
type PackageSpec struct {
	Name     string
	Versions []Version
}

// AdvisorySpec is an advisory of the dataset.
type AdvisorySpec struct {
	Name string
	Type string // security, bugfix, enhancement
}

// Dataset is the generated universe of packages, builds, repositories and
// advisories.
type Dataset struct {
	Seed       uint64
	Packages   []PackageSpec
	Repos      []string
	Advisories map[string]AdvisorySpec
	byName     map[string]*PackageSpec
	index      map[string]map[string]int // name -> EVRA -> version index
}

// DatasetSize chooses how large a dataset to generate.
type DatasetSize struct {
	Packages   int
	Repos      int
	Advisories int
}

// DefaultSize is thousands of packages and advisories, 150 repositories.
func DefaultSize() DatasetSize { return DatasetSize{Packages: 3000, Repos: 150, Advisories: 4000} }

var wellKnown = []string{"kernel", "openssl", "openssl-libs", "bash", "glibc", "systemd", "sudo", "curl", "python3-libs",
	"NetworkManager", "dnf", "rpm", "openssh-server", "openssh-clients", "coreutils", "util-linux", "tzdata", "vim-minimal"}

// NewDataset generates the dataset of seed.
func NewDataset(seed uint64, size DatasetSize) *Dataset {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	d := &Dataset{Seed: seed, Advisories: map[string]AdvisorySpec{}, byName: map[string]*PackageSpec{}, index: map[string]map[string]int{}}
	d.Repos = append(d.Repos, "rhel-8-for-x86_64-baseos-rpms", "rhel-8-for-x86_64-appstream-rpms")
	for i := len(d.Repos); i < size.Repos; i++ {
		d.Repos = append(d.Repos, fmt.Sprintf("repo-%03d-rpms", i))
	}
	advisories := make([]string, size.Advisories)
	for i := range advisories {
		prefix, typ := "RHSA", "security"
		switch r := rng.IntN(100); {
		case r >= 85:
			prefix, typ = "RHEA", "enhancement"
		case r >= 50:
			prefix, typ = "RHBA", "bugfix"
		}
		advisories[i] = fmt.Sprintf("%s-2026:%05d", prefix, i+1)
		d.Advisories[advisories[i]] = AdvisorySpec{Name: advisories[i], Type: typ}
	}
	for i := 0; i < size.Packages; i++ {
		name := fmt.Sprintf("pkg-%04d", i)
		if i < len(wellKnown) {
			name = wellKnown[i]
		}
		home := d.Repos[rng.IntN(min(len(d.Repos), 12))] // most builds come from a few big repositories
		n := 2 + rng.IntN(5)
		spec := PackageSpec{Name: name}
		major := 1 + rng.IntN(5)
		for v := 0; v < n; v++ {
			ver := Version{EVRA: fmt.Sprintf("0:%d.%d.0-%d.el8.%s", major, v, 1+rng.IntN(9), Arch), Repository: home}
			if v > 0 {
				if rng.IntN(100) < 80 {
					ver.Erratum = advisories[rng.IntN(len(advisories))]
				}
				if rng.IntN(100) < 15 {
					ver.Repository = d.Repos[rng.IntN(len(d.Repos))] // shipped elsewhere: applicable unless enabled
				}
			}
			spec.Versions = append(spec.Versions, ver)
		}
		d.Packages = append(d.Packages, spec)
	}
	for i := range d.Packages {
		p := &d.Packages[i]
		d.byName[p.Name] = p
		idx := map[string]int{}
		for v, ver := range p.Versions {
			idx[ver.EVRA] = v
		}
		d.index[p.Name] = idx
	}
	return d
}

// Update is one available update of an installed package.
type Update struct {
	Package     string // "name-0:1.2.0-3.el8.x86_64"
	PackageName string
	EVRA        string
	Erratum     string
	Repository  string
}

// UpdatesFor returns the updates of an installed NEVRA ("name-E:V-R.A"),
// newest last, keeping only those in repos when repos is not nil. An
// unknown package or build has none.
func (d *Dataset) UpdatesFor(nevra string, repos map[string]bool) []Update {
	name, evra, ok := splitNEVRA(nevra)
	if !ok {
		return nil
	}
	idx, ok := d.index[name][evra]
	if !ok {
		return nil
	}
	var out []Update
	for _, v := range d.byName[name].Versions[idx+1:] {
		if repos != nil && !repos[v.Repository] {
			continue
		}
		out = append(out, Update{Package: name + "-" + v.EVRA, PackageName: name, EVRA: v.EVRA, Erratum: v.Erratum, Repository: v.Repository})
	}
	return out
}

// splitNEVRA splits the canonical "name-E:V-R.A" form at the dash before
// the epoch.
func splitNEVRA(s string) (name, evra string, ok bool) {
	colon := strings.IndexByte(s, ':')
	if colon < 0 {
		return "", "", false
	}
	dash := strings.LastIndexByte(s[:colon], '-')
	if dash <= 0 {
		return "", "", false
	}
	return s[:dash], s[dash+1:], true
}

// Expected is the evaluation a correct listener stores for a profile.
type Expected struct {
	Advisories        map[string]string // name -> "installable" or "applicable"
	PackagesUpdatable int
}

// Evaluate computes, from the dataset alone, what a host with these
// installed packages and enabled repositories is affected by: an advisory is
// installable when one of its builds newer than an installed package is in
// an enabled repository, applicable when its builds are only elsewhere. A
// package is updatable when a newer build is in an enabled repository.
func (d *Dataset) Evaluate(packages []string, enabledRepos []string) Expected {
	enabled := map[string]bool{}
	for _, r := range enabledRepos {
		enabled[r] = true
	}
	e := Expected{Advisories: map[string]string{}}
	for _, p := range packages {
		updatable := false
		for _, u := range d.UpdatesFor(p, nil) {
			if enabled[u.Repository] {
				updatable = true
			}
			if u.Erratum == "" {
				continue
			}
			if enabled[u.Repository] {
				e.Advisories[u.Erratum] = "installable"
			} else if e.Advisories[u.Erratum] == "" {
				e.Advisories[u.Erratum] = "applicable"
			}
		}
		if updatable {
			e.PackagesUpdatable++
		}
	}
	return e
}

// PackageNames returns the names of every package, sorted.
func (d *Dataset) PackageNames() []string {
	out := make([]string, len(d.Packages))
	for i, p := range d.Packages {
		out[i] = p.Name
	}
	slices.Sort(out)
	return out
}
