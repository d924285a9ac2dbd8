package listener

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/cmd/internal/downstream"
	"github.com/patchflow/patchflow/cmd/internal/evaluation"
	"github.com/patchflow/patchflow/cmd/internal/telemetry"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
)

// DomainConfig is what the evaluating handler needs.
type DomainConfig struct {
	DatabaseURL      string
	Pool             persistence.PoolSettings
	VMaaSURL         string
	VMaaSTimeout     time.Duration
	VMaaSAttempts    int
	VMaaSCacheSize   int
	InventoryURL     string
	InventoryTimeout time.Duration
	Validation       messages.ValidationOptions
}

// Domain is a running handler and what it holds open.
type Domain struct {
	Handler   actors.Handler
	Store     *persistence.Store // nil for the simulated handler
	Evaluator *evaluation.Handler
	// Capacity is the simulated handler's capacity
	// (LISTENER_SIMULATED_CAPACITY), whose limit may be changed while it
	// runs; nil for the evaluating handler.
	Capacity *downstream.Capacity
	close    func()
}

// Ping checks the database; nil for the simulated handler.
func (d *Domain) Ping(ctx context.Context) error {
	if d.Store == nil {
		return nil
	}
	return d.Store.Ping(ctx)
}

// Close releases the handler's connections.
func (d *Domain) Close() {
	if d.close != nil {
		d.close()
	}
}

// NewDomain builds the handler cfg asks for: it connects to PostgreSQL and
// applies migrations for the evaluating handler.
func NewDomain(ctx context.Context, cfg *Config, logger *slog.Logger, metrics *telemetry.Metrics) (*Domain, error) {
	if cfg.Handler == "simulated" {
		return newSimulated(cfg)
	}
	d := cfg.Domain
	connectCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := persistence.Open(connectCtx, d.DatabaseURL, d.Pool)
	if err != nil {
		return nil, err
	}
	vmaas, err := clients.NewVMaaS(d.VMaaSURL, clients.VMaaSOptions{Timeout: d.VMaaSTimeout, MaxAttempts: d.VMaaSAttempts,
		BackoffMin: cfg.Pipeline.BackoffMin, BackoffMax: cfg.Pipeline.BackoffMax, CacheSize: d.VMaaSCacheSize})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("vmaas client: %w", err)
	}
	var inventory *clients.Inventory
	if d.InventoryURL != "" {
		inventory, err = clients.NewInventory(d.InventoryURL, clients.InventoryOptions{Timeout: d.InventoryTimeout, MaxAttempts: d.VMaaSAttempts,
			BackoffMin: cfg.Pipeline.BackoffMin, BackoffMax: cfg.Pipeline.BackoffMax})
		if err != nil {
			store.Close()
			return nil, fmt.Errorf("inventory client: %w", err)
		}
	}
	h := evaluation.New(store, vmaas, inventory, d.Validation, logger)
	if metrics != nil {
		h.Timings = metrics
	}
	logger.Info("database ready; schema migrated")
	return &Domain{Handler: h, Store: store, Evaluator: h, close: func() {
		vmaas.CloseIdleConnections()
		if inventory != nil {
			inventory.CloseIdleConnections()
		}
		store.Close()
	}}, nil
}

// newSimulated builds the simulated handler with its measurement knobs.
func newSimulated(cfg *Config) (*Domain, error) {
	h := SimulatedHandler{Latency: cfg.SimulatedLatency, Jitter: cfg.SimulatedJitter, Capacity: downstream.NewCapacity(cfg.SimulatedCapacity)}
	if cfg.SimulatedPinOffset >= 0 {
		h.Pinned = PinAt(int64(cfg.SimulatedPinOffset))
	}
	d := &Domain{Capacity: h.Capacity}
	if cfg.SimulatedRecordLog != "" {
		log, err := OpenRecordLog(cfg.SimulatedRecordLog)
		if err != nil {
			return nil, fmt.Errorf("LISTENER_SIMULATED_RECORD_LOG: %w", err)
		}
		h.Log = log
		d.close = func() { _ = log.Close() }
	}
	d.Handler = h
	return d, nil
}
