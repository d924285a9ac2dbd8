package listener_test

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/patchflow/patchflow/consumer"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// LISTENER_PPROF=true serves /debug/pprof/ at LISTENER_HTTP_ADDR; by default
// it is not served.
func TestPprofFollowsItsSetting(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want int
	}{
		{map[string]string{}, http.StatusNotFound},
		{map[string]string{"LISTENER_PPROF": "true"}, http.StatusOK},
	} {
		addr := freeAddr(t)
		c.env["LISTENER_HTTP_ADDR"] = addr
		startEmbeddedListener(t, c.env, consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil }))
		resp, err := http.Get("http://" + addr + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("LISTENER_PPROF=%q: /debug/pprof/ answered %d, want %d", c.env["LISTENER_PPROF"], resp.StatusCode, c.want)
		}
	}
}
