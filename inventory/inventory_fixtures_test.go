package inventory_test

import (
	"encoding/json"
	"testing"
)

// Fixtures are built as maps so each test can change exactly the field it is
// about and leave the rest of a realistic event in place.

const (
	testHostID = "8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b"
	testOrgID  = "org-12345"
)

func createdEvent() map[string]any {
	return map[string]any{
		"type":      "created",
		"timestamp": "2024-05-01T10:00:00.123456+00:00",
		"platform_metadata": map[string]any{
			"request_id":   "req-platform",
			"b64_identity": "eyJpZGVudGl0eSI6e319",
		},
		"metadata": map[string]any{"request_id": "req-metadata"},
		"host": map[string]any{
			"id":               testHostID,
			"org_id":           testOrgID,
			"account":          "000001",
			"display_name":     "web-01.example.com",
			"reporter":         "puptoo",
			"stale_timestamp":  "2024-05-02T15:00:00.5+02:00",
			"culled_timestamp": "2024-05-15T10:00:00Z",
			"per_reporter_staleness": map[string]any{
				"puptoo": map[string]any{
					"last_check_in":      "2024-05-01T09:59:58.000001+00:00",
					"stale_timestamp":    "2024-05-02T10:00:00+00:00",
					"check_in_succeeded": true,
				},
				"yupana": map[string]any{
					"last_check_in": "2024-04-30T08:00:00Z",
				},
				"cloud-connector": map[string]any{"check_in_succeeded": false},
			},
			"tags": []any{
				map[string]any{"namespace": "insights-client", "key": "env", "value": "prod"},
			},
			"groups": []any{
				map[string]any{"id": "0a7c43a3-2f1e-4f43-8e4b-4f1f2d3c4b5a", "name": "web servers", "org_id": testOrgID},
			},
			"system_profile": map[string]any{
				"arch":      "x86_64",
				"host_type": nil,
				"installed_packages": []any{
					"kernel-0:4.18.0-305.el8.x86_64",
					"python3-libs-0:3.6.8-37.el8.x86_64",
					"bash-4.4.20-1.el8_4.x86_64",
				},
				"yum_repos": []any{
					map[string]any{"id": "rhel-8-for-x86_64-baseos-rpms", "name": "BaseOS", "enabled": true, "base_url": "https://cdn.redhat.com/content/dist/rhel8/8/x86_64/baseos/os", "gpgcheck": true},
					map[string]any{"id": "epel", "name": "EPEL", "enabled": false},
				},
				"dnf_modules": []any{
					map[string]any{"name": "postgresql", "stream": "12"},
				},
				"rhsm":             map[string]any{"version": "8.4"},
				"releasever":       "8",
				"operating_system": map[string]any{"name": "RHEL", "major": 8, "minor": 4},
				"owner_id":         "1b36b20f-7fa0-4454-a6d2-008294e06378",
				"cpu_flags":        []any{"fpu", "vme", "sse4_2"},
				"running_processes": []any{
					"systemd", "sshd",
				},
			},
		},
	}
}

func updatedEvent() map[string]any {
	m := createdEvent()
	m["type"] = "updated"
	return m
}

func deleteEvent() map[string]any {
	return map[string]any{
		"type":              "delete",
		"id":                testHostID,
		"org_id":            testOrgID,
		"account":           "000001",
		"insights_id":       "c2d6b0a4-3f3c-4e0e-9a67-1f0b5c1e2d3f",
		"timestamp":         "2024-05-03T12:30:00+00:00",
		"platform_metadata": map[string]any{"request_id": "req-delete"},
	}
}

// idOnlyEvent is what older producers send: no profile, no reporter.
func idOnlyEvent() map[string]any {
	return map[string]any{
		"type":      "updated",
		"timestamp": "2024-05-01T10:00:00Z",
		"host":      map[string]any{"id": testHostID, "org_id": testOrgID},
	}
}

func hostOf(m map[string]any) map[string]any { return m["host"].(map[string]any) }

func profileOf(m map[string]any) map[string]any {
	return hostOf(m)["system_profile"].(map[string]any)
}

func encode(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// with returns the encoding of base after change has edited it.
func with(t testing.TB, base map[string]any, change func(m map[string]any)) []byte {
	t.Helper()
	change(base)
	return encode(t, base)
}
