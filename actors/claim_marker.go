package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
)

// ClaimMarker is a claim's own marker (BridgeConfig.ClaimMarkers): it takes
// the partition actor's marks in place of the session and commits them
// itself.
type ClaimMarker interface {
	OffsetMarker
	// End commits the last mark when it can and releases the marker. It
	// returns once nothing more will be committed for the claim.
	End()
}

// claimMarkerBackoff bounds the wait between tries to open a claim's
// marker.
var claimMarkerBackoff = [2]time.Duration{250 * time.Millisecond, 10 * time.Second}

// openClaimMarker opens the claim's marker, trying again with backoff
// until it opens or the claim ends (nil then). Each failure is logged.
func (b *Bridge) openClaimMarker(ctx context.Context, ended <-chan struct{}, claim sarama.ConsumerGroupClaim, log *slog.Logger) ClaimMarker {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ended:
			cancel()
		case <-ctx.Done():
		}
	}()
	wait := claimMarkerBackoff[0]
	for try := 1; ; try++ {
		m, err := b.cfg.ClaimMarkers(ctx, claim.Topic(), claim.Partition())
		if err == nil {
			return m
		}
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("could not open the claim's committer; nothing of the partition is admitted until it opens", "try", try, "retry_in", wait, "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, claimMarkerBackoff[1])
	}
}
