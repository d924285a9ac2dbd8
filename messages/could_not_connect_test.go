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
// error on an open connection or text that merely reads like one is not.
// Of the dials that failed, those timed out or cancelled, names that do not
// exist and addresses that do not parse are not ones no record causes
// (CouldNotConnect), though each is a dial that failed (DialFailed: booked
// as the network's); a join is read through every branch.
func TestCouldNotConnect(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		err                   error
		dialFailed, couldNotC bool
	}{
		{dial, true, true},
		{fmt.Errorf("fetch profile: %w", dial), true, true},
		{&net.DNSError{Err: "no such host", Name: "vmaas.invalid", IsNotFound: true}, true, false}, // a record can name it
		{&net.DNSError{Err: "server misbehaving", Name: "vmaas", IsTemporary: true}, true, true},
		{&net.OpError{Op: "proxyconnect", Net: "tcp", Err: dial}, true, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: timeout{}}, true, false}, // the attempt's deadline ends its dials too
		{fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: context.Canceled}), true, false},
		{fmt.Errorf("post: %w", syscall.EHOSTUNREACH), true, true},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, false, false},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), false, false},
		{errors.New("dial tcp 10.0.0.9:443: connect: connection refused"), false, false}, // flattened to text
		{fmt.Errorf("flattened: %v", dial), false, false},
		{errors.Join(errors.New("replica a"), &net.OpError{Op: "dial", Net: "tcp", Err: timeout{}}), true, false},
		{fmt.Errorf("replicas: %w, %w", errors.New("a"), &net.OpError{Op: "dial", Net: "tcp", Err: timeout{}}), true, false},
		{errors.Join(errors.New("replica a"), dial), true, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "missing port in address", Addr: "cb.example"}}, true, false}, // a record can carry it
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ETIMEDOUT)}, true, false},
		{&net.DNSError{Err: "i/o timeout", Name: "vmaas", IsTimeout: true}, true, false},
		{nil, false, false},
	} {
		if got := messages.DialFailed(c.err); got != c.dialFailed {
			t.Errorf("DialFailed(%v) = %v, want %v", c.err, got, c.dialFailed)
		}
		if got := messages.CouldNotConnect(c.err); got != c.couldNotC {
			t.Errorf("CouldNotConnect(%v) = %v, want %v", c.err, got, c.couldNotC)
		}
	}
}

// A real dial under an attempt's expired deadline is not one; a real
// refused dial is.
func TestCouldNotConnectRealDials(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:1"); err == nil || messages.CouldNotConnect(err) || !messages.DialFailed(err) {
		t.Errorf("a dial past the attempt's deadline (%v): counted as could not connect, or not as a failed dial", err)
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
