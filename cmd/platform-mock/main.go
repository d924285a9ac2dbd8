// Command platform-mock serves VMaaS POST /api/v3/updates and the inventory
// GET /api/inventory/v1/hosts/{id}/system_profile from a generated,
// deterministic advisory dataset, with configurable latency, a capacity
// (VMaaS calls served at once; the rest queue) and injected 503s, changeable
// at run time: POST /admin/faults {"error_rate":0.5,"latency":"fixed:2s","capacity":8}.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/patchflow/patchflow/cmd/internal/platform"
	"github.com/patchflow/patchflow/cmd/internal/settings"
)

func main() {
	var (
		addr, latency, invLatency string
		seed, packages, repos     int
		advisories, profPkgs      int
		profRepos, capacity       int
		errorRate                 string
		bulk                      bool
	)
	s := settings.New("platform-mock")
	s.String(&addr, "MOCK_ADDR", "addr", "127.0.0.1:8090", "listen address", nil)
	s.Int(&seed, "MOCK_SEED", "seed", 1, 0, "dataset seed; loadgen and checkers must use the same")
	s.String(&latency, "MOCK_LATENCY", "latency", "longtail:100ms", "VMaaS latency: fixed:D, uniform:D1-D2 or longtail:D (log-normal around median D)", checkLatency)
	s.String(&invLatency, "MOCK_INVENTORY_LATENCY", "inventory-latency", "fixed:20ms", "inventory latency, same forms", checkLatency)
	s.Int(&capacity, "MOCK_CAPACITY", "capacity", 0, 0, "VMaaS calls served at once, each for its latency; the others queue first come first served, the wait adding to their latency (0: any number)")
	s.String(&errorRate, "MOCK_ERROR_RATE", "error-rate", "0", "share of VMaaS calls answered 503 (0 to 1)", checkRate)
	s.Int(&packages, "MOCK_PACKAGES", "packages", platform.DefaultSize().Packages, 1, "packages in the dataset")
	s.Int(&repos, "MOCK_REPOS", "repos", platform.DefaultSize().Repos, 2, "repositories in the dataset")
	s.Int(&advisories, "MOCK_ADVISORIES", "advisories", platform.DefaultSize().Advisories, 1, "advisories in the dataset")
	s.Int(&profPkgs, "MOCK_PROFILE_PACKAGES", "profile-packages", platform.DefaultShape().Packages, 1, "installed packages per served profile (match loadgen)")
	s.Int(&profRepos, "MOCK_PROFILE_REPOS", "profile-repos", platform.DefaultShape().Repos, 2, "repositories per served profile (match loadgen)")
	s.Bool(&bulk, "MOCK_BULK_PROFILES", "bulk-profiles", true, "serve whole (about 100 KB) system profiles")
	err := s.Parse(os.Args[1:], os.LookupEnv)
	if errors.Is(err, settings.ErrHelp) {
		s.PrintUsage(os.Stdout)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "platform-mock:", err)
		os.Exit(settings.ExitUsage)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var rate float64
	fmt.Sscan(errorRate, &rate)
	inv, _ := platform.ParseLatency(invLatency)
	ds := platform.NewDataset(uint64(seed), platform.DatasetSize{Packages: packages, Repos: repos, Advisories: advisories})
	srv, err := platform.NewServer(ds, platform.ServerOptions{
		Faults:           platform.Faults{ErrorRate: rate, Latency: latency, Capacity: capacity},
		InventoryLatency: inv, Shape: platform.ProfileShape{Packages: profPkgs, Repos: profRepos}, BulkProfiles: bulk,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "platform-mock:", err)
		os.Exit(settings.ExitUsage)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "platform-mock:", err)
		os.Exit(1)
	}
	logger.Info("platform mock listening", "addr", ln.Addr().String(), "seed", seed, "vmaas_latency", latency, "capacity", capacity, "error_rate", rate)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("serve", "error", err)
		os.Exit(1)
	}
	st := srv.Stats()
	logger.Info("platform mock stopped", slog.Group("stats", "vmaas_calls", st.VMaaSCalls, "vmaas_503", st.VMaaS503, "vmaas_hung", st.VMaaSHung,
		"inventory_calls", st.InventoryCalls))
}

func checkLatency(v string) error { _, err := platform.ParseLatency(v); return err }

func checkRate(v string) error {
	var r float64
	if _, err := fmt.Sscan(v, &r); err != nil || r < 0 || r > 1 {
		return errors.New("must be a number from 0 to 1")
	}
	return nil
}
