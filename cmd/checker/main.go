// Command checker compares the database the listener wrote with the final
// state loadgen -expected says every host must be in, reading the tables
// with its own SQL. It exits 0 when every host matches, 1 when some are
// missing or wrong (or the check could not run), 2 on a bad setting.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/lib/pq" // the PostgreSQL driver

	"github.com/patchflow/patchflow/internal/redact"
	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/proving/checker"
)

func main() {
	cfg, set, err := checker.Parse(os.Args[1:], os.LookupEnv)
	if errors.Is(err, settings.ErrHelp) {
		fmt.Println("checker: compare the database with the state loadgen -expected wrote.\n\nSettings (flags win over environment variables):")
		set.PrintUsage(os.Stdout)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "checker:", err)
		os.Exit(settings.ExitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	secrets := redact.Secrets(cfg.DatabaseURL)
	db, err := sql.Open("postgres", cfg.DatabaseURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "checker: open the database:", redact.Error(err, secrets))
		os.Exit(1)
	}
	defer db.Close()
	rep, err := checker.Run(ctx, cfg, db, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "checker:", redact.Error(err, secrets))
		os.Exit(1)
	}
	if !rep.OK() {
		os.Exit(1)
	}
}
