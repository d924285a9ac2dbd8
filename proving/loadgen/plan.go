// Package loadgen plans and produces realistic inventory event streams:
// hosts registering, updating (or re-checking in with an unchanged or
// slightly changed profile) and being deleted, keyed by host id, with a
// chosen share of bad messages of every kind (broken: the listener must
// dead-letter them) and of messages the listener skips by design (filtered,
// or nothing to evaluate: committed and counted, never dead-lettered), and
// writes the final state every host must end in, for checkers.
package loadgen

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/patchflow/patchflow/proving/platform"
)

// Options shape the stream.
type Options struct {
	Seed        uint64
	Hosts       int
	Events      int     // good events; bad ones come on top
	Orgs        int     // organizations the hosts belong to
	DeleteShare float64 // share of events after the first per host that delete the host
	// RecheckShare and ChangeShare split the later events that do not
	// delete their host: RecheckShare re-check in with the host's profile
	// unchanged (a new timestamp only), ChangeShare with a few packages
	// changed (platform.Dataset.ProfileAt: one small change more), the rest
	// carry the host's next profile revision (about one package in twenty
	// updated). Both 0: every one is a next revision.
	RecheckShare  float64
	ChangeShare   float64
	IDOnlyShare   float64 // share of created/updated events that carry only the host id
	BadShare      float64 // share of bad messages, spread evenly over the bad kinds
	SkipShare     float64 // share of messages the listener skips, spread evenly over the skip kinds
	Shape         platform.ProfileShape
	Bulk          bool // the whole (about 100 KB) profile, not only what the listener reads
	Start         time.Time
	TooLargeBytes int // size of a "too large" bad message
}

// DefaultOptions: 20,000 events for 5,000 hosts, realistic profiles.
func DefaultOptions() Options {
	return Options{Seed: 1, Hosts: 5000, Events: 20000, Orgs: 50, DeleteShare: 0.05, IDOnlyShare: 0.02,
		Shape: platform.DefaultShape(), Bulk: true, Start: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), TooLargeBytes: 1_040_000}
}

// BadKind is a kind of broken message; the listener must dead-letter each
// one with its reason.
type BadKind string

// The bad kinds, matching the listener's validation reasons
// (inventory.ValidationReasons).
const (
	BadMalformedJSON BadKind = "malformed JSON"
	BadTooLarge      BadKind = "message too large"
	BadUnknownType   BadKind = "unknown event type"
	BadMissingHostID BadKind = "missing host id"
	BadMissingOrgID  BadKind = "missing org id"
	BadUnparsablePkg BadKind = "unparsable package"
	BadFutureTime    BadKind = "timestamp in the future" // a century ahead of its place in the stream
)

// BadKinds lists every kind, in a fixed order.
var BadKinds = []BadKind{BadMalformedJSON, BadTooLarge, BadUnknownType, BadMissingHostID, BadMissingOrgID, BadUnparsablePkg, BadFutureTime}

// SkipKind is a kind of valid message the listener ignores by design, in
// whole or in part: it must commit it and count it under the skip reason of
// the same name (inventory.SkipReasons), never dead-letter it.
type SkipKind string

// The skip kinds. Each is for a host no other event mentions.
const (
	SkipReporter   SkipKind = "reporter not allowed" // filtered: the host is never stored
	SkipHostType   SkipKind = "excluded host type"   // filtered (an edge host): never stored
	SkipNoPackages SkipKind = "nothing to evaluate"  // an empty package list: stored, with no packages and no advisories
)

// SkipKinds lists every skip kind, in a fixed order.
var SkipKinds = []SkipKind{SkipReporter, SkipHostType, SkipNoPackages}

// RecheckKind is how an updated event re-checks a host in.
type RecheckKind string

// The re-check-in kinds (Options.RecheckShare, Options.ChangeShare).
const (
	RecheckRepeat RecheckKind = "unchanged"              // the host's profile as it stands, a new timestamp
	RecheckChange RecheckKind = "a few packages changed" // one small change on top of the host's profile
)

// Item is one message of the plan.
type Item struct {
	Key     string
	Event   platform.EventSpec // for good events, and the base of the others
	Bad     BadKind            // non-empty for bad messages
	Skip    SkipKind           // non-empty for messages the listener skips
	Recheck RecheckKind        // non-empty for updated events that re-check in
}

// HostState is where a host must end.
type HostState struct {
	HostID   string `json:"host_id"`
	OrgID    string `json:"org_id"`
	Deleted  bool   `json:"deleted"`
	Revision int    `json:"revision"` // profile revision stored (0 after an id-only event)
	// Changes is the small changes stored on top of Revision
	// (platform.Dataset.ProfileAt; 0 after an id-only event).
	Changes   int       `json:"changes,omitempty"`
	EventTime time.Time `json:"event_time"` // time of the last event applied
	Events    int       `json:"events"`
	// Filtered: every event of the host was filtered out (reporter not
	// allowed, excluded host type), so it must not be stored.
	Filtered bool `json:"filtered,omitempty"`
	// NoPackages: the last event applied carried an empty package list, so
	// the host is stored with no packages and no advisories.
	NoPackages bool `json:"no_packages,omitempty"`
	// Unevaluated: no evaluation of the host can succeed (a test makes
	// every VMaaS call for its profiles hang), so nothing of it is stored:
	// a profile is stored together with its evaluation. Plans never set it;
	// a test that injects such a fault does.
	Unevaluated bool `json:"unevaluated,omitempty"`
}

// Plan is the stream in order, and the expected outcome.
type Plan struct {
	Items    []Item
	Expected map[string]*HostState
	Bad      map[BadKind]int
	Skipped  map[SkipKind]int
	Rechecks map[RecheckKind]int
}

// NewPlan lays out the stream: every host is created, then random live
// hosts are updated (or re-check in) or deleted; bad messages are mixed in
// at random places. The same options give the same plan.
func NewPlan(o Options) *Plan {
	rng := rand.New(rand.NewPCG(o.Seed, 0xfeed))
	p := &Plan{Expected: map[string]*HostState{}, Bad: map[BadKind]int{}, Skipped: map[SkipKind]int{}, Rechecks: map[RecheckKind]int{}}
	hosts := min(o.Hosts, o.Events)
	alive := make([]string, 0, hosts)
	revision := map[string]int{}
	at := o.Start
	next := func() time.Time { at = at.Add(time.Millisecond); return at }
	good := func(spec platform.EventSpec, recheck RecheckKind) {
		p.Items = append(p.Items, Item{Key: spec.HostID, Event: spec, Recheck: recheck})
		if recheck != "" {
			p.Rechecks[recheck]++
		}
		st := p.Expected[spec.HostID]
		st.Events++
		st.EventTime = spec.Timestamp
		switch {
		case spec.Type == "delete":
			st.Deleted = true
		case spec.IDOnly: // the listener fetches revision 0 from the inventory service
			st.Revision, st.Changes = 0, 0
		default:
			st.Revision, st.Changes = spec.Revision, spec.Changes
		}
	}
	for i := 0; i < hosts; i++ {
		id := platform.HostID(o.Seed, i)
		org := fmt.Sprintf("org-%05d", rng.IntN(max(1, o.Orgs)))
		p.Expected[id] = &HostState{HostID: id, OrgID: org}
		alive = append(alive, id)
		good(platform.EventSpec{Type: "created", HostID: id, OrgID: org, Timestamp: next(), Bulk: o.Bulk,
			RequestID: fmt.Sprintf("req-%d", len(p.Items)), IDOnly: rng.Float64() < o.IDOnlyShare}, "")
	}
	for len(p.Items) < o.Events && len(alive) > 0 {
		i := rng.IntN(len(alive))
		id := alive[i]
		org := p.Expected[id].OrgID
		if rng.Float64() < o.DeleteShare {
			good(platform.EventSpec{Type: "delete", HostID: id, OrgID: org, Timestamp: next(), RequestID: fmt.Sprintf("req-%d", len(p.Items))}, "")
			alive[i] = alive[len(alive)-1]
			alive = alive[:len(alive)-1]
			continue
		}
		var recheck RecheckKind
		if o.RecheckShare+o.ChangeShare > 0 { // no draw otherwise: plans without re-check-ins stay as they were
			switch x := rng.Float64(); {
			case x < o.RecheckShare:
				recheck = RecheckRepeat
			case x < o.RecheckShare+o.ChangeShare:
				recheck = RecheckChange
			}
		}
		st := p.Expected[id]
		spec := platform.EventSpec{Type: "updated", HostID: id, OrgID: org, Timestamp: next(), Bulk: o.Bulk, RequestID: fmt.Sprintf("req-%d", len(p.Items))}
		switch recheck {
		case RecheckRepeat: // what the host has now (after an id-only event: what inventory served)
			spec.Revision, spec.Changes = st.Revision, st.Changes
		case RecheckChange:
			spec.Revision, spec.Changes = st.Revision, st.Changes+1
		default:
			revision[id]++
			spec.Revision = revision[id]
		}
		spec.IDOnly = rng.Float64() < o.IDOnlyShare
		good(spec, recheck)
	}
	nGood := len(p.Items)
	insert := func(item Item) {
		pos := rng.IntN(len(p.Items) + 1)
		p.Items = append(p.Items, Item{})
		copy(p.Items[pos+1:], p.Items[pos:])
		p.Items[pos] = item
	}
	// Bad messages at random places, for hosts no good event mentions.
	nBad := int(float64(nGood)*o.BadShare + 0.5)
	for b := 0; b < nBad; b++ {
		kind := BadKinds[b%len(BadKinds)]
		p.Bad[kind]++
		insert(Item{Key: platform.HostID(o.Seed^0xbad, b), Bad: kind,
			Event: platform.EventSpec{Type: "created", HostID: platform.HostID(o.Seed^0xbad, b), OrgID: "org-bad", Timestamp: next()}})
	}
	// Messages the listener skips, likewise for hosts of their own: one
	// created event each, so the host's final state is what its kind says.
	nSkip := int(float64(nGood)*o.SkipShare + 0.5)
	for k := 0; k < nSkip; k++ {
		kind := SkipKinds[k%len(SkipKinds)]
		p.Skipped[kind]++
		id := platform.HostID(o.Seed^0x5c1b, k)
		spec := platform.EventSpec{Type: "created", HostID: id, OrgID: "org-skip", Timestamp: next(), RequestID: fmt.Sprintf("req-skip-%d", k)}
		st := &HostState{HostID: id, OrgID: spec.OrgID, Events: 1, Filtered: kind != SkipNoPackages}
		if kind == SkipNoPackages {
			st.NoPackages, st.EventTime = true, spec.Timestamp
		}
		p.Expected[id] = st
		insert(Item{Key: id, Skip: kind, Event: spec})
	}
	return p
}

// BadCount returns the number of bad messages in the plan.
func (p *Plan) BadCount() int {
	n := 0
	for _, c := range p.Bad {
		n += c
	}
	return n
}

// SkipCount returns the number of messages in the plan the listener skips.
func (p *Plan) SkipCount() int {
	n := 0
	for _, c := range p.Skipped {
		n += c
	}
	return n
}
