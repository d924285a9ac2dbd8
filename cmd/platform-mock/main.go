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

	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/proving/platform"
)

func main() {
	cfg, s, err := platform.ParseMockConfig(os.Args[1:], os.LookupEnv)
	if errors.Is(err, settings.ErrHelp) {
		s.PrintUsage(os.Stdout)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "platform-mock:", err)
		os.Exit(settings.ExitUsage)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ds := platform.NewDataset(uint64(cfg.Seed), cfg.Size)
	srv, err := platform.NewServer(ds, platform.ServerOptions{
		Faults: cfg.Faults, InventoryLatency: cfg.InventoryLatency, Shape: cfg.Shape, BulkProfiles: cfg.BulkProfiles,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "platform-mock:", err)
		os.Exit(settings.ExitUsage)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "platform-mock:", err)
		os.Exit(1)
	}
	logger.Info("platform mock listening", "addr", ln.Addr().String(), "seed", cfg.Seed, "vmaas_latency", cfg.Faults.Latency, "capacity", cfg.Faults.Capacity, "error_rate", cfg.Faults.ErrorRate)
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
