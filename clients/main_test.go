package clients_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a retry
// wait that ignored cancellation, or a connection whose body was never
// closed (its transport read loop would outlive the test). Tests close their
// servers and the clients' idle connections in cleanups, so nothing is
// ignored here.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
