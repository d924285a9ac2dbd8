package actors

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
)

// CoordinatorRefresher is a consumer group that can ask the brokers again
// which node coordinates it. sarama drops a cached coordinator only when it
// answers with a coordinator error code; one that stopped answering at all
// (killed, or cut off) stays cached, and every rejoin goes back to it until
// the client's metadata forgets the node. A group that implements this is
// refreshed after each failed session, so the next join asks a live broker.
type CoordinatorRefresher interface {
	RefreshCoordinator() error
}

// rejoinBackoffMax bounds the wait between failed sessions. A coordinator
// that moved is found by the next join, so a long wait only adds to the
// stall; 2 s keeps a member that cannot reach any broker to one warning in
// every 2 s.
const rejoinBackoffMax = 2 * time.Second

// RunMember keeps one consumer-group member consuming topics through handler
// until ctx is done, then closes the group (which commits the final marks and
// leaves the group). A failed session is retried with backoff (100 ms
// doubling to rejoinBackoffMax), after refreshing the group's coordinator
// when group is a CoordinatorRefresher; an eager rebalance ends a session
// normally and the loop joins the next one.
func RunMember(ctx context.Context, group sarama.ConsumerGroup, topics []string, handler sarama.ConsumerGroupHandler, logger *slog.Logger) error {
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		fetchErrors, _ := handler.(interface {
			FetchError(topic string, partition int32, err error)
		})
		for err := range group.Errors() {
			logger.Warn("consumer group error", "error", err)
			var ce *sarama.ConsumerError
			if fetchErrors != nil && errors.As(err, &ce) {
				fetchErrors.FetchError(ce.Topic, ce.Partition, ce.Err)
			}
		}
	}()
	defer func() {
		if err := group.Close(); err != nil {
			logger.Warn("closing consumer group", "error", err)
		}
		<-errsDone
	}()

	wait := 100 * time.Millisecond
	for {
		err := group.Consume(ctx, topics, handler)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return err
		}
		if err == nil {
			wait = 100 * time.Millisecond
			continue
		}
		logger.Warn("consumer group session failed; rejoining", "error", err, "in", wait)
		if r, ok := group.(CoordinatorRefresher); ok {
			// The refresh takes no context and may wait out the client's
			// network timeouts (30 s per broker, retried) when the brokers
			// are cut off: a shutdown must not wait for it.
			refreshed := make(chan error, 1)
			go func() { refreshed <- r.RefreshCoordinator() }()
			select {
			case err := <-refreshed:
				if err != nil {
					logger.Warn("finding the group's coordinator", "error", err)
				}
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		wait = min(2*wait, rejoinBackoffMax)
	}
}
