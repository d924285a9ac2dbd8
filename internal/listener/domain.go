package listener

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/evaluation"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/persistence"
)

// DomainConfig is what the evaluating handler needs.
type DomainConfig struct {
	DatabaseURL    string
	Pool           persistence.PoolSettings
	VMaaSURL       string
	VMaaSTimeout   time.Duration
	VMaaSAttempts  int
	VMaaSCacheSize int
	VMaaSCacheMB   int
	// AnswersMB is the answer budget the VMaaS and inventory clients
	// share (clients.AnswerBudget), in MiB; 0: no bound.
	AnswersMB        int
	InventoryURL     string
	InventoryTimeout time.Duration
	Validation       inventory.ValidationOptions
	// Effects are the messages published through the outbox.
	Effects EffectsConfig
}

// Domain is a running handler and what it holds open.
type Domain struct {
	Handler   consumer.Handler
	Store     *persistence.Store // nil for an extension's handler
	Evaluator *evaluation.Handler
	// PingVMaaS checks VMaaS; nil for an extension's handler.
	PingVMaaS func(context.Context) error
	// Extra is what an extension's handler offers beside it (the simulated
	// handler's capacity, say); nil for the evaluating handler.
	Extra any
	// Closer, when set, releases what the handler holds.
	Closer func()
	// effects and relay: the outbox's relay (StartEffects).
	effects EffectsConfig
	mu      sync.Mutex // guards relay and closed: StartEffectsRetrying runs beside Close
	relay   *effectsRelay
	closed  bool
}

// Ping checks the database; nil without one.
func (d *Domain) Ping(ctx context.Context) error {
	if d.Store == nil {
		return nil
	}
	return d.Store.Ping(ctx)
}

// Close stops the outbox relay (after publishing what waits, within its
// drain timeout) and releases the handler's connections.
func (d *Domain) Close() {
	d.mu.Lock()
	relay := d.relay
	d.relay, d.closed = nil, true
	d.mu.Unlock()
	if relay != nil {
		relay.close(d.Store)
	}
	if d.Closer != nil {
		d.Closer()
	}
}

// NewDomain builds the handler cfg asks for: it connects to PostgreSQL and
// applies migrations for the evaluating handler.
func NewDomain(ctx context.Context, cfg *Config, logger *slog.Logger) (*Domain, error) {
	if e := cfg.extension(cfg.Handler); e != nil {
		return e.NewDomain(ctx, cfg, logger)
	}
	d := cfg.Domain
	connectCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := persistence.Open(connectCtx, d.DatabaseURL, d.Pool)
	if err != nil {
		return nil, err
	}
	answers := clients.NewAnswerBudget(int64(d.AnswersMB) << 20)
	vmaas, err := clients.NewVMaaS(d.VMaaSURL, clients.VMaaSOptions{Timeout: d.VMaaSTimeout, MaxAttempts: d.VMaaSAttempts,
		BackoffMin: cfg.Pipeline.BackoffMin, BackoffMax: cfg.Pipeline.BackoffMax, CacheSize: d.VMaaSCacheSize,
		CacheBytes: int64(d.VMaaSCacheMB) << 20, Answers: answers})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("vmaas client: %w", err)
	}
	var inventory *clients.Inventory
	if d.InventoryURL != "" {
		inventory, err = clients.NewInventory(d.InventoryURL, clients.InventoryOptions{Timeout: d.InventoryTimeout, MaxAttempts: d.VMaaSAttempts,
			BackoffMin: cfg.Pipeline.BackoffMin, BackoffMax: cfg.Pipeline.BackoffMax, Answers: answers})
		if err != nil {
			store.Close()
			return nil, fmt.Errorf("inventory client: %w", err)
		}
	}
	h := evaluation.New(store, vmaas, inventory, d.Validation, logger)
	h.WriteEffects(d.Effects.Kinds)
	if sc := store.Schema(); sc.Applied {
		logger.Info("database ready; schema migrated", "schema_version", sc.Version)
	} else {
		logger.Info("database ready; schema current", "schema_version", sc.Version)
	}
	return &Domain{Handler: h, Store: store, Evaluator: h, PingVMaaS: vmaas.Ping, effects: d.Effects, Closer: func() {
		vmaas.CloseIdleConnections()
		if inventory != nil {
			inventory.CloseIdleConnections()
		}
		store.Close()
	}}, nil
}
