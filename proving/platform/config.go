package platform

import "github.com/patchflow/patchflow/internal/settings"

// MockConfig is the configuration of cmd/platform-mock.
type MockConfig struct {
	Addr string
	Seed int
	// Faults are the faults at start; POST /admin/faults changes them.
	Faults           Faults
	InventoryLatency Latency
	Size             DatasetSize
	Shape            ProfileShape
	BulkProfiles     bool
}

// ParseMockConfig reads the mock's configuration from lookup (the
// environment) and args (the flags, which win). It returns settings.ErrHelp
// for -h, or an error naming the bad setting.
func ParseMockConfig(args []string, lookup func(string) (string, bool)) (*MockConfig, *settings.Set, error) {
	c := &MockConfig{Size: DefaultSize(), Shape: DefaultShape()}
	var invLatency string
	s := settings.New("platform-mock")
	s.String(&c.Addr, "MOCK_ADDR", "addr", "127.0.0.1:8090", "listen address", nil)
	s.Int(&c.Seed, "MOCK_SEED", "seed", 1, 0, "dataset seed; loadgen and checkers must use the same")
	s.String(&c.Faults.Latency, "MOCK_LATENCY", "latency", "longtail:100ms", "VMaaS latency: `fixed:D`, `uniform:D1-D2` or `longtail:D` (log-normal around the median D)", checkLatency)
	s.String(&invLatency, "MOCK_INVENTORY_LATENCY", "inventory-latency", "fixed:20ms", "inventory latency, same forms", checkLatency)
	s.Int(&c.Faults.Capacity, "MOCK_CAPACITY", "capacity", 0, 0, "VMaaS calls served at once, each for its latency (`0`: any number); the others queue first come first served, the wait adding to their latency")
	s.Float(&c.Faults.ErrorRate, "MOCK_ERROR_RATE", "error-rate", 0, 0, 1, "share of VMaaS calls answered 503 (0 to 1)")
	s.Int(&c.Size.Packages, "MOCK_PACKAGES", "packages", c.Size.Packages, 1, "packages in the dataset")
	s.Int(&c.Size.Repos, "MOCK_REPOS", "repos", c.Size.Repos, 2, "repositories in the dataset")
	s.Int(&c.Size.Advisories, "MOCK_ADVISORIES", "advisories", c.Size.Advisories, 1, "advisories in the dataset")
	s.Int(&c.Shape.Packages, "MOCK_PROFILE_PACKAGES", "profile-packages", c.Shape.Packages, 1, "installed packages per served profile (match `LOADGEN_PACKAGES`)")
	s.Int(&c.Shape.Repos, "MOCK_PROFILE_REPOS", "profile-repos", c.Shape.Repos, 2, "repositories per served profile (match `LOADGEN_REPOS`)")
	s.Bool(&c.BulkProfiles, "MOCK_BULK_PROFILES", "bulk-profiles", true, "serve whole (about 100 KB) system profiles")
	if err := s.Parse(args, lookup); err != nil {
		return nil, s, err
	}
	c.InventoryLatency, _ = ParseLatency(invLatency)
	return c, s, nil
}

func checkLatency(v string) error { _, err := ParseLatency(v); return err }
