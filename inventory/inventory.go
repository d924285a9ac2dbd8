package inventory

import (
	"encoding/json"
	"time"

	"github.com/patchflow/patchflow/messages"
)

// EventType is the "type" field of an inventory event.
type EventType string

// The event types the listener acts on; DecodeInventoryEvent rejects any other.
const (
	EventCreated EventType = "created"
	EventUpdated EventType = "updated"
	EventDelete  EventType = "delete"
)

// InventoryEvent is one record of platform.inventory.events, reduced to what
// the listener uses.
//
// An event returned by DecodeInventoryEvent without error has a known Type,
// and HostID and OrgID are non-empty (the host id is a UUID). Host is
// non-nil for created and updated and nil for delete. Timestamp is in UTC and
// zero when the event had none; RequestID is empty when neither metadata
// object carried one.
type InventoryEvent struct {
	Type      EventType
	Timestamp time.Time
	// RequestID comes from platform_metadata.request_id, else from
	// metadata.request_id: producers have used both places.
	RequestID string

	// ID and DeleteOrgID are the top-level id and org_id, which only delete
	// events carry. The org field cannot be called OrgID because the method
	// OrgID, which callers should prefer, has that name.
	ID          string
	DeleteOrgID string

	Host *Host
}

// HostID returns the id of the host the event is about, wherever this type
// of event carries it.
func (e *InventoryEvent) HostID() string {
	if e.Type == EventDelete {
		return e.ID
	}
	if e.Host != nil {
		return e.Host.ID
	}
	return ""
}

// OrgID returns the organization owning the host, wherever this type of
// event carries it.
func (e *InventoryEvent) OrgID() string {
	if e.Type == EventDelete {
		return e.DeleteOrgID
	}
	if e.Host != nil {
		return e.Host.OrgID
	}
	return ""
}

// Host is the host object of a created or updated event.
//
// Timestamps are in UTC; an absent, null or empty one is nil (or left out of
// LastCheckIn). LastCheckIn maps each reporter in per_reporter_staleness to
// its last_check_in and is nil when there is none. Tags holds the tags JSON
// as sent, whatever its shape, and is nil when absent or null.
//
// SystemProfile is nil when the event carried no system_profile, as older
// producers do: the profile must then be fetched from the inventory service
// and decoded with DecodeSystemProfile.
type Host struct {
	ID              string
	OrgID           string
	DisplayName     string
	Reporter        string
	StaleTimestamp  *time.Time
	CulledTimestamp *time.Time
	LastCheckIn     map[string]time.Time
	Tags            json.RawMessage
	Groups          []Group
	SystemProfile   *SystemProfile
}

// SystemProfile holds the fields of a host's system profile that evaluation
// uses; decoding skips all others (cpu flags, processes, services, ...).
//
// InstalledPackages are NEVRA strings as sent. After DecodeInventoryEvent or
// ValidateSystemProfile, each parses with ParseNEVRA; the list may be empty
// (a host with nothing to evaluate). RHSMVersion is rhsm.version; OperatingSystem is nil when the
// profile has none.
type SystemProfile struct {
	Arch              string
	HostType          string
	InstalledPackages []string
	YumRepos          []YumRepo
	DnfModules        []DnfModule
	RHSMVersion       string
	Releasever        string
	OperatingSystem   *OperatingSystem
	OwnerID           string
}

// YumRepo is one entry of system_profile.yum_repos. Enabled is false when
// the field is absent.
type YumRepo struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	BaseURL string `json:"base_url"`
}

// DnfModule is one enabled module stream of system_profile.dnf_modules.
type DnfModule struct {
	Name   string `json:"name"`
	Stream string `json:"stream"`
}

// OperatingSystem is system_profile.operating_system, e.g. RHEL 8.4 is
// {Name: "RHEL", Major: 8, Minor: 4}.
type OperatingSystem struct {
	Name  string `json:"name"`
	Major int    `json:"major"`
	Minor int    `json:"minor"`
}

// Group is one inventory group the host belongs to.
type Group struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// DecodeSystemProfile decodes a system profile object fetched from the
// inventory service (the value of system_profile, not the response around
// it), for events that carried none. It only decodes: apply
// ValidateSystemProfile before using the packages. JSON null gives an empty
// profile, never a nil one. Errors are permanent *messages.ValidationError values
// with ReasonMalformedJSON.
func DecodeSystemProfile(data []byte) (*SystemProfile, error) {
	var w wireSystemProfile
	if err := unmarshalProfile(data, &w); err != nil {
		return nil, messages.Invalid(ReasonMalformedJSON, describeJSONError(err))
	}
	return w.profile(), nil
}
