package persistence

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Package is one installed package: its name and "epoch:version-release.arch".
type Package struct {
	Name string
	EVRA string
}

// Module is an enabled dnf module stream.
type Module struct {
	Name   string
	Stream string
}

// SystemUpload is what a created/updated event says about a host.
type SystemUpload struct {
	OrgID       string
	InventoryID string
	// EventTime orders the events of a host: an upload not newer than the
	// last applied one is ignored (redelivery, replay). It is stored, and
	// compared, to the microsecond (the database's precision).
	EventTime       time.Time
	RequestID       string
	DisplayName     string
	Reporter        string
	Arch            string
	HostType        string
	OSName          string
	OSMajor         *int
	OSMinor         *int
	Releasever      string
	RHSMVersion     string
	Repos           []string // enabled repository ids
	Modules         []Module
	Packages        []Package
	StaleTimestamp  *time.Time
	CulledTimestamp *time.Time
	LastUpload      time.Time // the reporter's last check-in, else EventTime
}

// canonicalize sorts and de-duplicates the lists so that equal profiles
// store and hash equally whatever order the reporter used, and rounds the
// event time to the microsecond the database keeps: compared unrounded with
// the stored time, a redelivery would read as a newer event (applied again)
// or an older one, and its evaluation would never match the stored event.
//
// It sorts copies: u is passed by value, and its slices share their arrays
// with the caller's upload, which the caller goes on using.
func (u *SystemUpload) canonicalize() {
	u.EventTime = u.EventTime.Round(time.Microsecond)
	u.Repos = sortedUnique(u.Repos)
	u.Modules = slices.Clone(u.Modules)
	u.Packages = slices.Clone(u.Packages)
	// By name, then stream or EVRA: the order of the two joined by a NUL
	// byte, which names do not hold, without building the joined strings
	// (two allocations a comparison were half of the objects the listener
	// allocated end to end).
	slices.SortFunc(u.Modules, func(a, b Module) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Stream, b.Stream))
	})
	u.Modules = slices.Compact(u.Modules)
	slices.SortFunc(u.Packages, func(a, b Package) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.EVRA, b.EVRA))
	})
	u.Packages = slices.Compact(u.Packages)
}

// checksum hashes what the evaluation depends on.
func (u *SystemUpload) checksum() string {
	h := sha256.New()
	w := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	w(u.Arch)
	w(u.Releasever)
	w(strconv.Itoa(len(u.Repos)))
	for _, r := range u.Repos {
		w(r)
	}
	w(strconv.Itoa(len(u.Modules)))
	for _, m := range u.Modules {
		w(m.Name)
		w(m.Stream)
	}
	w(strconv.Itoa(len(u.Packages)))
	for _, p := range u.Packages {
		w(p.Name)
		w(p.EVRA)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (u *SystemUpload) moduleStrings() []string {
	out := make([]string, len(u.Modules))
	for i, m := range u.Modules {
		out[i] = m.Name + ":" + m.Stream
	}
	return out
}

// UploadResult says what StoreSystem or StoreEvaluatedSystem did (or, in
// UploadCheck, what they would do).
type UploadResult struct {
	SystemID int64
	// Applied is false when the upload was ignored: not newer than the last
	// applied event, or the host was deleted recently.
	Applied bool
	// Skipped says why an upload was not applied: SkippedOlder,
	// SkippedSameEvent or SkippedDeleted.
	Skipped string
	// NeedsEvaluation is true when the stored profile has not been evaluated
	// yet (also for an ignored redelivery whose first delivery stored the
	// profile but did not get to evaluate it).
	NeedsEvaluation bool
	// EventTime is the event time of the stored profile (the upload's when
	// it was applied, the last applied event's otherwise).
	EventTime time.Time
	// server is when the server SystemID was read on started: the id is
	// that server's (StoreEvaluation checks it). Zero: not known.
	server time.Time
}

// Reasons an upload is skipped.
const (
	SkippedOlder     = "older than the last applied event"
	SkippedSameEvent = "the time of the last applied event" // that event again, in practice: a redelivery
	SkippedDeleted   = "host deleted recently"
)

// AdvisoryStatus is how an advisory relates to a system.
type AdvisoryStatus string

// Statuses: installable when a fix is in a repository the system has
// enabled, applicable when the fix exists only elsewhere.
const (
	Installable AdvisoryStatus = "installable"
	Applicable  AdvisoryStatus = "applicable"
)

// AdvisoryResult is one advisory affecting a system.
type AdvisoryResult struct {
	Name   string
	Type   string // security, bugfix, enhancement, unknown
	Status AdvisoryStatus
}

// Evaluation is the outcome of evaluating a stored profile.
type Evaluation struct {
	Advisories        []AdvisoryResult
	PackagesUpdatable int
	// Effects are the messages storing it writes to the outbox, in the
	// same transaction; nil: none.
	Effects *Effects
}

// sortedUnique never returns nil: a nil slice would be stored as NULL in a
// NOT NULL array column (a profile without enabled repositories).
func sortedUnique(in []string) []string {
	out := append([]string{}, in...)
	slices.Sort(out)
	return slices.Compact(out)
}
