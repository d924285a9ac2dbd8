package actors

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// A panic's stack is cut to its bound at a line, says how much it left
// out, and starts at the frame that panicked.
func TestPanicStackIsBoundedAndStartsAtThePanic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		frames := rapid.SliceOf(rapid.StringMatching(`[a-z./]{1,80}`)).Draw(t, "frames")
		limit := rapid.IntRange(64, 4096).Draw(t, "limit")
		stack := "goroutine 7 [running]:\nruntime/debug.Stack()\n\t/go/debug.go:1\npanic({0x1, 0x2})\n\t/go/panic.go:2\n" +
			strings.Join(frames, "\n") + "\n"
		got := panicStack([]byte(stack), limit)
		if len(got) > limit {
			t.Fatalf("%d bytes over a bound of %d", len(got), limit)
		}
		if strings.Contains(got, "runtime/debug.Stack") || strings.Contains(got, "panic({") {
			t.Fatalf("the recovery's frames are kept: %q", got)
		}
		whole := strings.Join(frames, "\n")
		if len(whole) <= limit {
			if got != whole {
				t.Fatalf("a stack within the bound changed: %q, want %q", got, whole)
			}
			return
		}
		if !strings.Contains(got, " bytes of stack more") || !strings.HasPrefix(whole, strings.SplitN(got, "\n…", 2)[0]) {
			t.Fatalf("a cut stack %q is not a prefix of %q with a note", got, whole)
		}
	})
}
