package listener

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitShare is the part of the container's memory the Go runtime is
// told it may use (its soft limit): the rest is for what the runtime does not
// count (thread stacks outside the heap, the kernel's page tables, cgo-free
// but not free of the C library) and for the GC to act before the kernel's
// OOM killer does.
const memoryLimitShare = 0.9

// cgroupMemoryFiles are where a container's memory limit is read, cgroup v2
// then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryLimit is the soft memory limit the runtime gets, and where it came
// from: GOMEMLIMIT when set (the runtime read it already: nothing to do),
// else memoryLimitShare of configured (LISTENER_MEMORY_LIMIT, the pod's
// limits.memory through the downward API), else of the cgroup's limit.
// Without any it is 0: the runtime's default, no limit.
func memoryLimit(goMemLimit string, configured int64, readFile func(string) ([]byte, error)) (limit int64, source string) {
	if goMemLimit != "" {
		return 0, "GOMEMLIMIT"
	}
	if configured > 0 {
		return int64(float64(configured) * memoryLimitShare), "LISTENER_MEMORY_LIMIT"
	}
	for _, f := range cgroupMemoryFiles {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(v, 10, 64)
		// "max" (v2) or a page-rounded huge number (v1): no limit.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0, ""
		}
		return int64(float64(n) * memoryLimitShare), f
	}
	return 0, ""
}

// applyMemoryLimit sets the runtime's soft memory limit as memoryLimit says
// and returns what it set (0: left alone) and why.
func applyMemoryLimit(configured int64) (limit int64, source string) {
	limit, source = memoryLimit(os.Getenv("GOMEMLIMIT"), configured, os.ReadFile)
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return limit, source
}
