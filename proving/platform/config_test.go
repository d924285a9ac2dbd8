package platform_test

import (
	"errors"
	"testing"

	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/proving/platform"
)

func lookupIn(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

// The mock's settings reach its configuration, and a bad one is named.
func TestParseMockConfig(t *testing.T) {
	c, _, err := platform.ParseMockConfig([]string{"-capacity", "8"}, lookupIn(map[string]string{
		"MOCK_ERROR_RATE": "0.25", "MOCK_LATENCY": "fixed:50ms", "MOCK_INVENTORY_LATENCY": "fixed:3ms", "MOCK_PROFILE_PACKAGES": "40"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8090" || c.Seed != 1 || c.Size != platform.DefaultSize() || c.Shape.Packages != 40 ||
		c.Shape.Repos != platform.DefaultShape().Repos || !c.BulkProfiles {
		t.Errorf("configuration %+v", c)
	}
	if f := c.Faults; f.ErrorRate != 0.25 || f.Latency != "fixed:50ms" || f.Capacity != 8 {
		t.Errorf("faults %+v", f)
	}
	if l := c.InventoryLatency; l.Kind != "fixed" || l.Base.Milliseconds() != 3 {
		t.Errorf("inventory latency %+v", l)
	}
	for env, bad := range map[string]string{"MOCK_ERROR_RATE": "1.5", "MOCK_LATENCY": "slow", "MOCK_INVENTORY_LATENCY": "fixed:x", "MOCK_REPOS": "1"} {
		_, _, err := platform.ParseMockConfig(nil, lookupIn(map[string]string{env: bad}))
		var se *settings.Error
		if !errors.As(err, &se) || se.Env != env {
			t.Errorf("%s=%s: error %v, want one naming %s", env, bad, err, env)
		}
	}
}
