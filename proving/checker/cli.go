package checker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
)

// Config is the checker command's configuration: where the database is,
// the expected-state file loadgen wrote, and the dataset and profile shape
// loadgen and the platform mock used.
type Config struct {
	DatabaseURL string
	Expected    string
	Seed        int
	Shape       platform.ProfileShape
	// Wait, when positive, checks again every second until every host
	// matches or Wait has passed: the listener may still be working.
	Wait     time.Duration
	Parallel int
}

// Parse reads the configuration from lookup (the environment) and args
// (the flags, which win). The seed and shape settings have loadgen's names,
// so one environment serves both.
func Parse(args []string, lookup func(string) (string, bool)) (*Config, *settings.Set, error) {
	c := &Config{Shape: platform.DefaultShape()}
	s := settings.New("checker")
	s.SecretURL(&c.DatabaseURL, "DATABASE_URL", "database-url", "PostgreSQL the listener writes to (required), in the forms the listener takes; its password is never printed", persistence.CheckURL)
	s.String(&c.Expected, "LOADGEN_EXPECTED", "expected", "", "the expected-state file loadgen -expected wrote (required)", nil)
	s.Int(&c.Seed, "LOADGEN_SEED", "seed", 1, 0, "seed loadgen and the platform mock used")
	s.Int(&c.Shape.Packages, "LOADGEN_PACKAGES", "packages", c.Shape.Packages, 1, "installed packages per host loadgen used")
	s.Int(&c.Shape.Repos, "LOADGEN_REPOS", "repos", c.Shape.Repos, 2, "yum repositories per host loadgen used")
	s.Duration(&c.Wait, "CHECKER_WAIT", "wait", 0, 0, "check again every second until every host matches or this long has passed (0: check once)")
	s.Int(&c.Parallel, "CHECKER_PARALLEL", "parallel", 8, 1, "hosts checked at once")
	if err := s.Parse(args, lookup); err != nil {
		return nil, s, err
	}
	if c.DatabaseURL == "" {
		return nil, s, s.Invalid("database-url", errors.New("required"))
	}
	if c.Expected == "" {
		return nil, s, s.Invalid("expected", errors.New("required: the file loadgen -expected wrote"))
	}
	return c, s, nil
}

// Run checks the database against the expected state, printing the report
// (and, when hosts differ, examples) to out. It returns the last report; an
// error only when the check itself could not run.
func Run(ctx context.Context, c *Config, db *sql.DB, out io.Writer) (Report, error) {
	expected, err := loadgen.ReadExpected(c.Expected)
	if err != nil {
		return Report{}, fmt.Errorf("read %s: %w", c.Expected, err)
	}
	ds := platform.NewDataset(uint64(c.Seed), platform.DefaultSize())
	deadline := time.Now().Add(c.Wait)
	for {
		rep, err := Check(ctx, db, ds, c.Shape, expected, c.Parallel)
		if err != nil {
			return rep, err
		}
		if rep.OK() || !time.Now().Before(deadline) {
			fmt.Fprintln(out, rep)
			for _, e := range rep.Examples {
				fmt.Fprintln(out, "  "+e)
			}
			return rep, nil
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
