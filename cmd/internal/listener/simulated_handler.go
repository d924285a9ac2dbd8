package listener

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/patchflow/patchflow/messages"
)

// PoisonPrefix marks a record value the simulated handler rejects as
// malformed, so demos and tests can exercise the dead-letter path.
const PoisonPrefix = "poison:"

// SimulatedHandler stands in for the domain handler: it waits Latency plus a
// uniform random part of Jitter, honouring cancellation, and succeeds,
// except for values starting with PoisonPrefix, which fail permanently. It
// lets the pipeline be run and measured without PostgreSQL or VMaaS.
type SimulatedHandler struct {
	Latency, Jitter time.Duration
}

// Handle implements actors.Handler.
func (h SimulatedHandler) Handle(ctx context.Context, r *messages.Record) error {
	if bytes.HasPrefix(r.GetValue(), []byte(PoisonPrefix)) {
		return messages.Permanent(fmt.Errorf("malformed event: value starts with %q", PoisonPrefix))
	}
	d := h.Latency
	if h.Jitter > 0 {
		d += rand.N(h.Jitter)
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
