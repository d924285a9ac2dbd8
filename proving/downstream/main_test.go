package downstream_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: an
// Acquire that never returned.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
