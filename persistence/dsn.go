package persistence

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/internal/redact"
)

// CheckURL reports whether Open accepts dsn: a postgres:// or postgresql://
// URL that names its host (after the user info, or as ?host= for a Unix
// socket directory), or a libpq key=value string ("host=db user=patch
// password=..."), either as lib/pq reads it at connect time (the PG*
// environment variables included). Its error never contains the password:
// its text is worked out from dsn with its secrets masked (see
// internal/redact: redact.Check), so at most it says the trouble lies in
// the hidden part.
func CheckURL(dsn string) error { return redact.Check(dsn, checkDSN) }

// checkDSN is CheckURL's test, on any string; its errors may quote dsn.
func checkDSN(dsn string) error {
	if strings.TrimSpace(dsn) == "" {
		return errors.New("empty")
	}
	scheme, isURL := redact.Scheme(dsn)
	switch {
	case isURL && scheme != "postgres" && scheme != "postgresql":
		return fmt.Errorf("scheme %q: a URL must start postgres:// or postgresql://", scheme)
	case isURL:
		u, err := url.Parse(dsn)
		if err != nil {
			var uerr *url.Error
			if errors.As(err, &uerr) { // its text quotes the whole URL
				err = uerr.Err
			}
			return fmt.Errorf("not a valid URL: %w", err)
		}
		if u.Hostname() == "" && u.Query().Get("host") == "" {
			return errors.New("no host: write postgres://user:password@host:5432/database (or ?host=/socket/directory)")
		}
		// An '@' past the host is most often one of an unescaped password
		// whose '/', '?' or '#' ended the user info early: the URL would
		// parse, and name a wrong host and database.
		if strings.Contains(u.EscapedPath(), "@") || strings.Contains(u.RawQuery, "@") || strings.Contains(u.Fragment, "@") {
			return errors.New("an '@' after the host: percent-encode it (%40)")
		}
	case !strings.Contains(dsn, "="):
		return errors.New("neither a postgres:// URL nor a key=value connection string (host=... dbname=...)")
	}
	if _, err := pq.NewConfig(dsn); err != nil {
		return err
	}
	return nil
}

// secretsOf returns the secrets of dsn (see redact.Secrets) and the
// password lib/pq would use (PGPASSWORD's included), in every form an
// error text may carry them.
func secretsOf(dsn string) []string {
	secrets := redact.Secrets(dsn)
	if cfg, err := pq.NewConfig(dsn); err == nil {
		for _, f := range redact.Forms(cfg.Password) {
			if !slices.Contains(secrets, f) {
				secrets = append(secrets, f)
			}
		}
	}
	slices.SortStableFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	return secrets
}
