package actors

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
)

// RunMember keeps one consumer-group member consuming topics through handler
// until ctx is done, then closes the group (which commits the final marks and
// leaves the group). A failed session is retried with backoff; an eager
// rebalance ends a session normally and the loop joins the next one.
func RunMember(ctx context.Context, group sarama.ConsumerGroup, topics []string, handler sarama.ConsumerGroupHandler, logger *slog.Logger) error {
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		fetchErrors, _ := handler.(interface {
			FetchError(topic string, partition int32)
		})
		for err := range group.Errors() {
			logger.Warn("consumer group error", "error", err)
			var ce *sarama.ConsumerError
			if fetchErrors != nil && errors.As(err, &ce) {
				fetchErrors.FetchError(ce.Topic, ce.Partition)
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
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		wait = min(2*wait, 10*time.Second)
	}
}
