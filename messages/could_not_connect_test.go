package messages_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
)

// A failure to connect is told apart by its type, wrapped however deep; an
// error on an open connection, a deadline (a dial's among them), a name
// that does not exist, or text that merely reads like one is not.
func TestCouldNotConnect(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{dial, true},
		{fmt.Errorf("fetch profile: %w", dial), true},
		{&net.DNSError{Err: "no such host", Name: "vmaas.invalid", IsNotFound: true}, false}, // a record can name it
		{&net.DNSError{Err: "server misbehaving", Name: "vmaas", IsTemporary: true}, true},
		{&net.OpError{Op: "proxyconnect", Net: "tcp", Err: dial}, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: timeout{}}, false}, // the attempt's deadline ends its dials too
		{fmt.Errorf("dial: %w", context.Canceled), false},
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

// A real dial under an attempt's expired deadline is not one; a real
// refused dial is.
func TestCouldNotConnectRealDials(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:1"); err == nil || messages.CouldNotConnect(err) {
		t.Errorf("a dial past the attempt's deadline (%v) counted as could not connect", err)
	}
	if _, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", "127.0.0.1:1"); err == nil || !messages.CouldNotConnect(err) {
		t.Errorf("a refused dial (%v) not counted as could not connect", err)
	}
}

// timeout is what a dial returns when its context's deadline passed: an
// i/o timeout that is context.DeadlineExceeded.
type timeout struct{}

func (timeout) Error() string        { return "i/o timeout" }
func (timeout) Timeout() bool        { return true }
func (timeout) Is(target error) bool { return target == context.DeadlineExceeded }
