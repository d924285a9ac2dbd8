package persistence

import (
	"context"
	"net"
	"time"
)

// The TCP settings of every connection to the server (dialer). A peer gone
// without a word (its host down, a NAT or firewall that forgot the
// connection) is noticed by the kernel within about deadPeerTimeout: on an
// idle connection of the pool by keepalive probes (keepAliveIdle, then
// keepAliveCount probes keepAliveInterval apart), and where Linux allows
// it, on a connection with data the peer never acknowledges by
// TCP_USER_TIMEOUT. They bound the calls without a deadline (the
// migrations) and keep the pool from handing out connections that died
// idle. They are no deadline: a server that is up but does not answer (a
// frozen process, a proxy that holds the data) keeps acknowledging; the
// guard (guardedConn) is what ends a call by its deadline.
const (
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	deadPeerTimeout   = keepAliveIdle + keepAliveCount*keepAliveInterval
)

// dialer is the lib/pq Dialer of every pool. lib/pq dials for two reasons:
// to open a session, under the context guardedConnector.Connect gives it
// (holding the session's socket, which gets the connection, for the guard
// to close), and to send a cancel request when a call's context ends,
// under a context of its own (no socket). A cancel request's connection is
// closed cancelGrace after it is dialed, the dial included: a server that
// serves has answered by then, and a prepared statement's call waits for
// its cancel request to end (lib/pq would wait up to the connect timeout,
// and for the answer without a bound).
type dialer struct{ d net.Dialer }

func newDialer() dialer {
	return dialer{d: net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount},
		Control:         setUserTimeout,
	}}
}

func (d dialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

func (d dialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, network, address)
}

func (d dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	sock, session := ctx.Value(socketKey{}).(*socket)
	if !session {
		ctx, cancel := context.WithTimeout(ctx, cancelGrace)
		defer cancel()
		c, err := d.d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		deadline, _ := ctx.Deadline()
		time.AfterFunc(time.Until(deadline), func() { _ = c.Close() })
		return c, nil
	}
	c, err := d.d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	if err := sock.use(c); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}
