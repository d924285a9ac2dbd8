package listener

import (
	"io/fs"
	"testing"
)

// The runtime's soft limit follows the container's: GOMEMLIMIT wins, then
// the configured limit, then the cgroup's; "max" or no cgroup file leaves
// it alone.
func TestMemoryLimitFollowsTheContainer(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if v, ok := m[name]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	const mib = 1 << 20
	cases := []struct {
		name       string
		goMemLimit string
		configured int64
		files      map[string]string
		want       int64
		source     string
	}{
		{"GOMEMLIMIT set", "400MiB", 512 * mib, map[string]string{"/sys/fs/cgroup/memory.max": "536870912\n"}, 0, "GOMEMLIMIT"},
		{"downward API", "", 512 * mib, map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, 512 * mib * 9 / 10, "LISTENER_MEMORY_LIMIT"},
		{"cgroup v2", "", 0, map[string]string{"/sys/fs/cgroup/memory.max": "536870912\n"}, 512 * mib * 9 / 10, "/sys/fs/cgroup/memory.max"},
		{"cgroup v2 without a limit", "", 0, map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, 0, ""},
		{"cgroup v1", "", 0, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824"}, 1024 * mib * 9 / 10, "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{"cgroup v1 without a limit", "", 0, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"}, 0, ""},
		{"no cgroup", "", 0, nil, 0, ""},
	}
	for _, c := range cases {
		got, source := memoryLimit(c.goMemLimit, c.configured, files(c.files))
		if diff := got - c.want; diff < -mib || diff > mib || source != c.source {
			t.Errorf("%s: %d from %q, want %d from %q", c.name, got, source, c.want, c.source)
		}
	}
}
