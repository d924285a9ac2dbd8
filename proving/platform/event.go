package platform

import (
	"encoding/json"
	"fmt"
	"time"
)

// EventSpec describes one inventory event to generate.
type EventSpec struct {
	Type      string // created, updated or delete
	HostID    string
	OrgID     string
	Revision  int       // which profile revision of the host the event carries
	Changes   int       // small changes on top of Revision (Dataset.ProfileAt)
	Timestamp time.Time // event time; orders a host's events
	RequestID string
	// IDOnly leaves the system profile out, as older producers do; the
	// listener then fetches revision 0 from the inventory service.
	IDOnly   bool
	Reporter string // default puptoo
	HostType string
	Bulk     bool // the whole profile a real host reports (about 100 KB)
}

type eventDoc struct {
	Type             string         `json:"type"`
	Timestamp        string         `json:"timestamp"`
	ID               string         `json:"id,omitempty"`
	OrgID            string         `json:"org_id,omitempty"`
	Host             *hostDoc       `json:"host,omitempty"`
	PlatformMetadata map[string]any `json:"platform_metadata,omitempty"`
}

type hostDoc struct {
	ID                   string                    `json:"id"`
	OrgID                string                    `json:"org_id"`
	DisplayName          string                    `json:"display_name"`
	AnsibleHost          *string                   `json:"ansible_host"`
	Account              string                    `json:"account,omitempty"`
	InsightsID           string                    `json:"insights_id"`
	SubscriptionMgrID    string                    `json:"subscription_manager_id"`
	FQDN                 string                    `json:"fqdn"`
	Reporter             string                    `json:"reporter"`
	StaleTimestamp       string                    `json:"stale_timestamp"`
	CulledTimestamp      string                    `json:"culled_timestamp"`
	PerReporterStaleness map[string]map[string]any `json:"per_reporter_staleness"`
	Tags                 []map[string]string       `json:"tags"`
	Groups               []map[string]string       `json:"groups"`
	SystemProfile        *SystemProfileDoc         `json:"system_profile,omitempty"`
	Created              string                    `json:"created"`
	Updated              string                    `json:"updated"`
}

// Event renders an inventory event as JSON, shaped like the ones the
// inventory service publishes.
func (d *Dataset) Event(spec EventSpec, shape ProfileShape) ([]byte, error) {
	ts := spec.Timestamp.UTC().Format(time.RFC3339Nano)
	doc := eventDoc{Type: spec.Type, Timestamp: ts}
	if spec.RequestID != "" {
		doc.PlatformMetadata = map[string]any{"request_id": spec.RequestID}
	}
	if spec.Type == "delete" {
		doc.ID, doc.OrgID = spec.HostID, spec.OrgID
		return json.Marshal(doc)
	}
	reporter := spec.Reporter
	if reporter == "" {
		reporter = "puptoo"
	}
	h := &hostDoc{
		ID: spec.HostID, OrgID: spec.OrgID, DisplayName: "host-" + spec.HostID[:8] + ".example.com",
		InsightsID: spec.HostID, SubscriptionMgrID: spec.HostID, FQDN: "host-" + spec.HostID[:8] + ".example.com",
		Reporter:        reporter,
		StaleTimestamp:  spec.Timestamp.Add(26 * time.Hour).UTC().Format(time.RFC3339Nano),
		CulledTimestamp: spec.Timestamp.Add(14 * 24 * time.Hour).UTC().Format(time.RFC3339Nano),
		PerReporterStaleness: map[string]map[string]any{reporter: {
			"last_check_in": ts, "stale_timestamp": spec.Timestamp.Add(26 * time.Hour).UTC().Format(time.RFC3339Nano),
			"check_in_succeeded": true}},
		Tags:    []map[string]string{{"namespace": "insights-client", "key": "env", "value": "prod"}},
		Groups:  []map[string]string{},
		Created: ts, Updated: ts,
	}
	if !spec.IDOnly {
		doc := SystemProfile(d.ProfileAt(spec.HostID, spec.Revision, spec.Changes, shape), spec.Bulk)
		doc.HostType = spec.HostType
		h.SystemProfile = &doc
	}
	doc.Host = h
	return json.Marshal(doc)
}

// HostID returns the i-th host id of a generated population: a UUID that
// is a pure function of seed and i.
func HostID(seed uint64, i int) string {
	x := hostSeed(seed, fmt.Sprint("host", i))
	y := hostSeed(seed^0x5bd1e995, fmt.Sprint("host", i))
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(x>>32), uint16(x>>16), uint16(x)&0xfff, uint16(y>>48)&0xfff, y&0xffffffffffff)
}
