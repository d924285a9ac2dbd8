package persistence_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// A value of idle_in_transaction_session_timeout in DATABASE_URL wins over
// DB_IDLE_IN_TRANSACTION_TIMEOUT, however the URL sets it: as a parameter
// of its own, or in options=-c name=value (PostgreSQL's documented way, and
// what PGOPTIONS does). The pool once looked only for the parameter of its
// own and added its value to the startup packet, which the server applies
// after the options' -c: the URL's value was overridden.
func TestAURLValueOfIdleInTransactionWins(t *testing.T) {
	ctx := context.Background()
	base := pgtest.URL(t)
	for _, tc := range []struct{ name, query, want string }{
		{"as its own parameter", "idle_in_transaction_session_timeout=0", "0"},
		{"in options -c", "options=" + url.QueryEscape("-c idle_in_transaction_session_timeout=0"), "0"},
		{"in options -c, another value", "options=" + url.QueryEscape("-c idle_in_transaction_session_timeout=60000"), "1min"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(base)
			if err != nil {
				t.Fatal(err)
			}
			q := u.RawQuery
			if q != "" {
				q += "&"
			}
			u.RawQuery = q + tc.query
			s, err := persistence.Open(ctx, u.String(), persistence.DefaultPoolSettings())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got string
			if err := s.DB().QueryRowContext(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("URL %s: the session's idle_in_transaction_session_timeout is %q, want the URL's %q", tc.query, got, tc.want)
			}
		})
	}
}
