package inventory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/patchflow/patchflow/messages"
)

// The wire types mirror the JSON and hold only the fields the listener uses,
// so decoding skips the bulk of a ~100 KB event (processes, services, cpu
// flags...) without building anything. They are filled as json.Unmarshal
// fills them, by the fast path of inventory_scan.go or by json.Unmarshal
// itself. Timestamps are decoded as strings and parsed afterwards so an
// error can name the field.

type wireEvent struct {
	Type             string        `json:"type"`
	Timestamp        string        `json:"timestamp"`
	ID               string        `json:"id"`
	OrgID            string        `json:"org_id"`
	Host             *wireHost     `json:"host"`
	PlatformMetadata *wireMetadata `json:"platform_metadata"`
	Metadata         *wireMetadata `json:"metadata"`
}

type wireMetadata struct {
	RequestID string `json:"request_id"`
}

type wireHost struct {
	ID                   string                   `json:"id"`
	OrgID                string                   `json:"org_id"`
	DisplayName          string                   `json:"display_name"`
	Reporter             string                   `json:"reporter"`
	StaleTimestamp       string                   `json:"stale_timestamp"`
	CulledTimestamp      string                   `json:"culled_timestamp"`
	PerReporterStaleness map[string]wireStaleness `json:"per_reporter_staleness"`
	Tags                 json.RawMessage          `json:"tags"`
	Groups               []Group                  `json:"groups"`
	SystemProfile        *wireSystemProfile       `json:"system_profile"`
}

type wireStaleness struct {
	LastCheckIn string `json:"last_check_in"`
}

type wireSystemProfile struct {
	Arch              string           `json:"arch"`
	HostType          string           `json:"host_type"`
	InstalledPackages []string         `json:"installed_packages"`
	YumRepos          []YumRepo        `json:"yum_repos"`
	DnfModules        []DnfModule      `json:"dnf_modules"`
	RHSM              *wireRHSM        `json:"rhsm"`
	Releasever        string           `json:"releasever"`
	OperatingSystem   *OperatingSystem `json:"operating_system"`
	OwnerID           string           `json:"owner_id"`
}

type wireRHSM struct {
	Version string `json:"version"`
}

// decodeEvent turns JSON into an InventoryEvent without judging its content;
// the only errors are malformed JSON, wrong types and unparsable timestamps.
func decodeEvent(data []byte) (*InventoryEvent, error) {
	var w wireEvent
	if err := unmarshalEvent(data, &w); err != nil {
		return nil, messages.Invalid(ReasonMalformedJSON, describeJSONError(err))
	}
	return w.event()
}

func (w *wireEvent) event() (*InventoryEvent, error) {
	ev := &InventoryEvent{
		Type:        EventType(w.Type),
		ID:          w.ID,
		DeleteOrgID: w.OrgID,
	}
	var err error
	if ev.Timestamp, err = parseTimestamp("timestamp", w.Timestamp); err != nil {
		return nil, err
	}
	if w.PlatformMetadata != nil {
		ev.RequestID = w.PlatformMetadata.RequestID
	}
	if ev.RequestID == "" && w.Metadata != nil {
		ev.RequestID = w.Metadata.RequestID
	}
	// A delete may echo a host object; dropping it keeps "Host is nil for
	// delete" true so handlers cannot read stale host fields.
	if w.Host != nil && ev.Type != EventDelete {
		if ev.Host, err = w.Host.host(); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

func (w *wireHost) host() (*Host, error) {
	h := &Host{
		ID:          w.ID,
		OrgID:       w.OrgID,
		DisplayName: w.DisplayName,
		Reporter:    w.Reporter,
		Groups:      w.Groups,
	}
	var err error
	if h.StaleTimestamp, err = parseOptionalTimestamp("host.stale_timestamp", w.StaleTimestamp); err != nil {
		return nil, err
	}
	if h.CulledTimestamp, err = parseOptionalTimestamp("host.culled_timestamp", w.CulledTimestamp); err != nil {
		return nil, err
	}
	// In order, so that of several bad check-ins the error always names
	// the same.
	for _, reporter := range slices.Sorted(maps.Keys(w.PerReporterStaleness)) {
		s := w.PerReporterStaleness[reporter]
		if s.LastCheckIn == "" {
			continue
		}
		t, err := parseTimestamp("host.per_reporter_staleness."+reporter+".last_check_in", s.LastCheckIn)
		if err != nil {
			return nil, err
		}
		if h.LastCheckIn == nil {
			h.LastCheckIn = make(map[string]time.Time, len(w.PerReporterStaleness))
		}
		h.LastCheckIn[reporter] = t
	}
	// RawMessage receives the literal null; callers should only have to
	// check for nil.
	if len(w.Tags) > 0 && !bytes.Equal(w.Tags, []byte("null")) {
		h.Tags = w.Tags
	}
	if w.SystemProfile != nil {
		h.SystemProfile = w.SystemProfile.profile()
	}
	return h, nil
}

func (w *wireSystemProfile) profile() *SystemProfile {
	p := &SystemProfile{
		Arch:              w.Arch,
		HostType:          w.HostType,
		InstalledPackages: w.InstalledPackages,
		YumRepos:          w.YumRepos,
		DnfModules:        w.DnfModules,
		Releasever:        w.Releasever,
		OperatingSystem:   w.OperatingSystem,
		OwnerID:           w.OwnerID,
	}
	if w.RHSM != nil {
		p.RHSMVersion = w.RHSM.Version
	}
	return p
}

// parseTimestamp treats an empty string like an absent field: producers
// write "" for "unknown" and that is not worth dead-lettering a host.
func parseTimestamp(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, messages.Invalid(ReasonMalformedJSON, fmt.Sprintf("%s: %s is not an RFC 3339 timestamp", field, quote(s)))
	}
	return t.UTC(), nil
}

func parseOptionalTimestamp(field, s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := parseTimestamp(field, s)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// describeJSONError rewrites encoding/json errors in terms of the JSON, not
// of this package's unexported Go types, since the detail ends up in
// dead-letter records read by people who only know the event format.
func describeJSONError(err error) string {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("at byte %d: %v", syntax.Offset, syntax)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		field := typ.Field
		if field == "" {
			field = "event"
		}
		// Value is "number " and the literal for a number, which the
		// input makes as long as it likes.
		value := typ.Value
		if len(value) > quoteLimit {
			value = value[:quoteLimit] + "..."
		}
		return fmt.Sprintf("%s: got %s, want %s", field, value, jsonKind(typ.Type))
	}
	return err.Error()
}

func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	}
	return t.String()
}
