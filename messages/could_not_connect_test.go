package messages_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/patchflow/patchflow/messages"
)

// A failure to connect is told apart by its type, wrapped however deep; an
// error on an open connection, a deadline or text that merely reads like
// one is not.
func TestCouldNotConnect(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{dial, true},
		{fmt.Errorf("fetch profile: %w", dial), true},
		{&net.DNSError{Err: "no such host", Name: "vmaas.invalid", IsNotFound: true}, true},
		{fmt.Errorf("post: %w", syscall.EHOSTUNREACH), true},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, false},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), false},
		{errors.New("dial tcp 10.0.0.9:443: connect: connection refused"), false}, // flattened to text
		{fmt.Errorf("flattened: %v", dial), false},
		{nil, false},
	} {
		if got := messages.CouldNotConnect(c.err); got != c.want {
			t.Errorf("CouldNotConnect(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
