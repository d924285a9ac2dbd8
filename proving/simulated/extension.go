package simulated

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/proving/downstream"
)

// Knobs are the simulated handler's settings (LISTENER_SIMULATED_*).
type Knobs struct {
	Latency, Jitter time.Duration
	// Capacity is how many records it serves at once; the others queue
	// (0: any number).
	Capacity int
	// RecordLog and PinOffset are measurement knobs (see Handler): a file
	// that gets a line per completed record (empty: none), and the offset
	// whose record waits in every partition until its context ends (-1:
	// none).
	RecordLog string
	PinOffset int
}

// Extension adds LISTENER_HANDLER=simulated and its settings to the
// listener; the knobs parsed land in k.
func Extension(k *Knobs) listener.Extension {
	return listener.Extension{
		Handler:     "simulated",
		HandlerHelp: "only wait, to measure the pipeline alone (the proving ground's build)",
		Register: func(s *settings.Set) {
			s.Duration(&k.Latency, "LISTENER_SIMULATED_LATENCY", "simulated-latency", 10*time.Millisecond, 0, "latency of the simulated handler")
			s.Duration(&k.Jitter, "LISTENER_SIMULATED_JITTER", "simulated-jitter", 0, 0, "extra uniform random latency of the simulated handler, up to this much")
			s.Int(&k.Capacity, "LISTENER_SIMULATED_CAPACITY", "simulated-capacity", 0, 0, "records the simulated handler serves at once, each for its latency (`0`: any number); the others queue, first come first served, and the wait counts in their handler time, so latency climbs once the pipeline's concurrency passes it, as in front of a downstream with this many workers. Pinned records take no slot")
			s.String(&k.RecordLog, "LISTENER_SIMULATED_RECORD_LOG", "simulated-record-log", "", "measurement only (`make bench`), with `LISTENER_HANDLER=simulated`: a file the handler appends one line `partition offset` to for every record it completes, before the record counts as done; each line is one unbuffered write with `O_APPEND`, so a SIGKILL loses no line already written, and a record whose line is missing was never completed", nil)
			s.Int(&k.PinOffset, "LISTENER_SIMULATED_PIN_OFFSET", "simulated-pin-offset", -1, -1, "measurement only (`make bench`), with `LISTENER_HANDLER=simulated`: the record at this offset in every partition waits until its context ends (the drain cancels it at a revoke or shutdown, or `LISTENER_ATTEMPT_TIMEOUT` passes), so it pins its partition's watermark (`-1`: none)")
		},
		Check: func(s *settings.Set, cfg *listener.Config) error {
			if cfg.Handler == "simulated" {
				return nil
			}
			if k.RecordLog != "" {
				return s.Invalid("simulated-record-log", errors.New("only for LISTENER_HANDLER=simulated"))
			}
			if k.PinOffset >= 0 {
				return s.Invalid("simulated-pin-offset", errors.New("only for LISTENER_HANDLER=simulated"))
			}
			return nil
		},
		NewDomain: func(context.Context, *listener.Config, *slog.Logger) (*listener.Domain, error) { return k.domain() },
	}
}

// domain builds the simulated handler with its measurement knobs; the
// Domain's Extra is its *downstream.Capacity.
func (k *Knobs) domain() (*listener.Domain, error) {
	h := Handler{Latency: k.Latency, Jitter: k.Jitter, Capacity: downstream.NewCapacity(k.Capacity)}
	if k.PinOffset >= 0 {
		h.Pinned = PinAt(int64(k.PinOffset))
	}
	d := &listener.Domain{Extra: h.Capacity}
	if k.RecordLog != "" {
		log, err := OpenRecordLog(k.RecordLog)
		if err != nil {
			return nil, fmt.Errorf("LISTENER_SIMULATED_RECORD_LOG: %w", err)
		}
		h.Log = log
		d.Closer = func() { _ = log.Close() }
	}
	d.Handler = h
	return d, nil
}
