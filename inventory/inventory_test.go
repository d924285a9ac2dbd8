package inventory_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UTC()
}

func decode(t *testing.T, data []byte) *inventory.InventoryEvent {
	t.Helper()
	ev, err := inventory.DecodeInventoryEvent(data, inventory.DefaultValidationOptions())
	if err != nil {
		t.Fatalf("DecodeInventoryEvent: %v\n%s", err, data)
	}
	return ev
}

func TestDecodeCreatedEvent(t *testing.T) {
	ev := decode(t, encode(t, createdEvent()))

	if ev.Type != inventory.EventCreated {
		t.Errorf("Type = %q", ev.Type)
	}
	if want := mustTime(t, "2024-05-01T10:00:00.123456Z"); !ev.Timestamp.Equal(want) || ev.Timestamp.Location() != time.UTC {
		t.Errorf("Timestamp = %v, want %v in UTC", ev.Timestamp, want)
	}
	if ev.RequestID != "req-platform" {
		t.Errorf("RequestID = %q, want the platform_metadata one", ev.RequestID)
	}
	if ev.HostID() != testHostID || ev.OrgID() != testOrgID {
		t.Errorf("HostID, OrgID = %q, %q", ev.HostID(), ev.OrgID())
	}

	h := ev.Host
	if h.ID != testHostID || h.OrgID != testOrgID || h.DisplayName != "web-01.example.com" || h.Reporter != "puptoo" {
		t.Errorf("host identity = %+v", h)
	}
	if h.StaleTimestamp == nil || !h.StaleTimestamp.Equal(mustTime(t, "2024-05-02T13:00:00.5Z")) {
		t.Errorf("StaleTimestamp = %v", h.StaleTimestamp)
	}
	if h.CulledTimestamp == nil || !h.CulledTimestamp.Equal(mustTime(t, "2024-05-15T10:00:00Z")) {
		t.Errorf("CulledTimestamp = %v", h.CulledTimestamp)
	}
	wantCheckIn := map[string]time.Time{
		"puptoo": mustTime(t, "2024-05-01T09:59:58.000001Z"),
		"yupana": mustTime(t, "2024-04-30T08:00:00Z"),
	}
	if !reflect.DeepEqual(h.LastCheckIn, wantCheckIn) {
		t.Errorf("LastCheckIn = %v, want %v (a reporter without last_check_in is left out)", h.LastCheckIn, wantCheckIn)
	}
	var tags []map[string]string
	if err := json.Unmarshal(h.Tags, &tags); err != nil || len(tags) != 1 || tags[0]["value"] != "prod" {
		t.Errorf("Tags = %s (%v)", h.Tags, err)
	}
	if want := []inventory.Group{{ID: "0a7c43a3-2f1e-4f43-8e4b-4f1f2d3c4b5a", Name: "web servers"}}; !reflect.DeepEqual(h.Groups, want) {
		t.Errorf("Groups = %+v", h.Groups)
	}

	want := &inventory.SystemProfile{
		Arch:     "x86_64",
		HostType: "",
		InstalledPackages: []string{
			"kernel-0:4.18.0-305.el8.x86_64",
			"python3-libs-0:3.6.8-37.el8.x86_64",
			"bash-4.4.20-1.el8_4.x86_64",
		},
		YumRepos: []inventory.YumRepo{
			{ID: "rhel-8-for-x86_64-baseos-rpms", Name: "BaseOS", Enabled: true, BaseURL: "https://cdn.redhat.com/content/dist/rhel8/8/x86_64/baseos/os"},
			{ID: "epel", Name: "EPEL"},
		},
		DnfModules:      []inventory.DnfModule{{Name: "postgresql", Stream: "12"}},
		RHSMVersion:     "8.4",
		Releasever:      "8",
		OperatingSystem: &inventory.OperatingSystem{Name: "RHEL", Major: 8, Minor: 4},
		OwnerID:         "1b36b20f-7fa0-4454-a6d2-008294e06378",
	}
	if !reflect.DeepEqual(h.SystemProfile, want) {
		t.Errorf("SystemProfile =\n%+v\nwant\n%+v", h.SystemProfile, want)
	}
}

func TestDecodeUpdatedEvent(t *testing.T) {
	data := with(t, updatedEvent(), func(m map[string]any) {
		delete(m, "platform_metadata")
		p := profileOf(m)
		p["arch"] = "aarch64"
		p["operating_system"] = map[string]any{"name": "CentOS Linux", "major": 7, "minor": 9}
	})
	ev := decode(t, data)
	if ev.Type != inventory.EventUpdated {
		t.Errorf("Type = %q", ev.Type)
	}
	if ev.RequestID != "req-metadata" {
		t.Errorf("RequestID = %q, want the metadata one when platform_metadata is absent", ev.RequestID)
	}
	p := ev.Host.SystemProfile
	if p.Arch != "aarch64" || *p.OperatingSystem != (inventory.OperatingSystem{Name: "CentOS Linux", Major: 7, Minor: 9}) {
		t.Errorf("profile = %+v, os %+v", p, p.OperatingSystem)
	}
}

func TestDecodeDeleteEvent(t *testing.T) {
	data := with(t, deleteEvent(), func(m map[string]any) {
		// A host echoed on delete must not leak into the event.
		m["host"] = map[string]any{"id": "11111111-1111-1111-1111-111111111111", "org_id": "other"}
	})
	ev := decode(t, data)
	if ev.Type != inventory.EventDelete || ev.Host != nil {
		t.Errorf("Type = %q, Host = %+v", ev.Type, ev.Host)
	}
	if ev.ID != testHostID || ev.DeleteOrgID != testOrgID || ev.HostID() != testHostID || ev.OrgID() != testOrgID {
		t.Errorf("ID %q DeleteOrgID %q HostID() %q OrgID() %q", ev.ID, ev.DeleteOrgID, ev.HostID(), ev.OrgID())
	}
	if !ev.Timestamp.Equal(mustTime(t, "2024-05-03T12:30:00Z")) {
		t.Errorf("Timestamp = %v", ev.Timestamp)
	}
	if ev.RequestID != "req-delete" {
		t.Errorf("RequestID = %q", ev.RequestID)
	}
}

func TestDecodeIDOnlyEvent(t *testing.T) {
	ev := decode(t, encode(t, idOnlyEvent()))
	if ev.Host == nil || ev.Host.SystemProfile != nil {
		t.Fatalf("Host = %+v, want a host without profile", ev.Host)
	}
	if ev.HostID() != testHostID || ev.OrgID() != testOrgID {
		t.Errorf("HostID, OrgID = %q, %q", ev.HostID(), ev.OrgID())
	}
	if ev.Host.LastCheckIn != nil || ev.Host.Tags != nil || ev.Host.StaleTimestamp != nil || ev.RequestID != "" {
		t.Errorf("absent fields should be nil or empty: %+v, request id %q", ev.Host, ev.RequestID)
	}

	// null is how some producers spell "no profile".
	data := with(t, idOnlyEvent(), func(m map[string]any) { hostOf(m)["system_profile"] = nil })
	if ev := decode(t, data); ev.Host.SystemProfile != nil {
		t.Errorf("system_profile null gave %+v", ev.Host.SystemProfile)
	}
}

func TestDecodeRequestID(t *testing.T) {
	cases := []struct {
		name             string
		platform, legacy any
		want             string
	}{
		{"platform only", map[string]any{"request_id": "p"}, nil, "p"},
		{"metadata only", nil, map[string]any{"request_id": "m"}, "m"},
		{"platform wins", map[string]any{"request_id": "p"}, map[string]any{"request_id": "m"}, "p"},
		{"empty platform falls back", map[string]any{"request_id": ""}, map[string]any{"request_id": "m"}, "m"},
		{"platform without request id falls back", map[string]any{"b64_identity": "x"}, map[string]any{"request_id": "m"}, "m"},
		{"none", nil, nil, ""},
	}
	for _, c := range cases {
		data := with(t, deleteEvent(), func(m map[string]any) {
			m["platform_metadata"] = c.platform
			m["metadata"] = c.legacy
		})
		if got := decode(t, data).RequestID; got != c.want {
			t.Errorf("%s: RequestID = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDecodeToleratesUnknownFields(t *testing.T) {
	data := with(t, createdEvent(), func(m map[string]any) {
		m["future_field"] = map[string]any{"deep": []any{1, "two", nil, map[string]any{"x": 1.5}}}
		m["platform_metadata"].(map[string]any)["extra"] = []any{true}
		h := hostOf(m)
		h["facts"] = []any{map[string]any{"namespace": "satellite", "facts": map[string]any{"a": 1}}}
		h["canonical_facts"] = map[string]any{"fqdn": "x"}
		p := profileOf(m)
		p["network_interfaces"] = []any{map[string]any{"name": "eth0", "ipv4_addresses": []any{"10.0.0.1"}}}
		p["installed_services"] = []any{"sshd", "crond"}
		p["rhsm"].(map[string]any)["environment_ids"] = []any{"x"}
		p["yum_repos"].([]any)[0].(map[string]any)["mirrorlist"] = nil
	})
	ev := decode(t, data)
	if len(ev.Host.SystemProfile.InstalledPackages) != 3 || ev.Host.SystemProfile.RHSMVersion != "8.4" {
		t.Errorf("known fields lost next to unknown ones: %+v", ev.Host.SystemProfile)
	}
}

func TestDecodeOptionalFieldsAbsentOrNull(t *testing.T) {
	data := with(t, createdEvent(), func(m map[string]any) {
		h := hostOf(m)
		h["tags"] = nil
		h["stale_timestamp"] = ""
		h["culled_timestamp"] = nil
		h["per_reporter_staleness"] = map[string]any{"puptoo": map[string]any{"last_check_in": ""}}
		p := profileOf(m)
		delete(p, "operating_system")
		p["rhsm"] = nil
		p["yum_repos"] = nil
	})
	h := decode(t, data).Host
	if h.Tags != nil || h.StaleTimestamp != nil || h.CulledTimestamp != nil || h.LastCheckIn != nil {
		t.Errorf("host = %+v, want nil tags, timestamps and check-ins", h)
	}
	if p := h.SystemProfile; p.OperatingSystem != nil || p.RHSMVersion != "" || p.YumRepos != nil {
		t.Errorf("profile = %+v, want no OS, rhsm or repos", p)
	}
}

func TestDecodeTagsKeepShape(t *testing.T) {
	data := with(t, createdEvent(), func(m map[string]any) {
		hostOf(m)["tags"] = map[string]any{"insights-client": map[string]any{"env": []any{"prod"}}}
	})
	if got := string(decode(t, data).Host.Tags); got != `{"insights-client":{"env":["prod"]}}` {
		t.Errorf("Tags = %s", got)
	}
}

func TestDecodeUppercaseUUID(t *testing.T) {
	upper := strings.ToUpper(testHostID)
	data := with(t, createdEvent(), func(m map[string]any) { hostOf(m)["id"] = upper })
	if got := decode(t, data).HostID(); got != upper {
		t.Errorf("HostID = %q, want it as sent", got)
	}
}

func TestDecodeSystemProfile(t *testing.T) {
	raw := encode(t, profileOf(createdEvent()))
	p, err := inventory.DecodeSystemProfile(raw)
	if err != nil {
		t.Fatal(err)
	}
	if p.Arch != "x86_64" || len(p.InstalledPackages) != 3 || len(p.YumRepos) != 2 || p.RHSMVersion != "8.4" || p.OperatingSystem.Major != 8 {
		t.Errorf("profile = %+v", p)
	}
	if err := inventory.ValidateSystemProfile(p, inventory.DefaultValidationOptions()); err != nil {
		t.Errorf("ValidateSystemProfile: %v", err)
	}

	p, err = inventory.DecodeSystemProfile([]byte("null"))
	if err != nil || p == nil || len(p.InstalledPackages) != 0 {
		t.Errorf("null: %+v, %v; want an empty profile", p, err)
	}

	for _, bad := range []string{`{"installed_packages": "kernel"}`, `{"arch": 1}`, `{`, ``} {
		p, err := inventory.DecodeSystemProfile([]byte(bad))
		var ve *messages.ValidationError
		if p != nil || !errors.As(err, &ve) || ve.Reason != inventory.ReasonMalformedJSON ||
			messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_PERMANENT {
			t.Errorf("%q: %+v, %v; want a permanent malformed JSON error", bad, p, err)
		}
	}
}

func TestHostIDWithoutHost(t *testing.T) {
	ev := &inventory.InventoryEvent{Type: inventory.EventCreated, ID: testHostID, DeleteOrgID: testOrgID}
	if ev.HostID() != "" || ev.OrgID() != "" {
		t.Errorf("created without host: HostID %q OrgID %q; top-level fields belong to delete only", ev.HostID(), ev.OrgID())
	}
}
