package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/patchflow/patchflow/actors/ordering"
)

// Settings tune the pipeline. The zero value is not valid; start from
// DefaultSettings.
type Settings struct {
	// InFlightPerPartition (S) bounds the records admitted and not finished in
	// one partition, held-back records included.
	InFlightPerPartition int
	// InFlightTotal (G) bounds the records admitted and not finished in the
	// whole process.
	InFlightTotal int
	// Ordering is the ordering guarantee within a partition.
	Ordering ordering.Mode
	// DrainTimeout bounds how long a partition waits for in-flight records at
	// the end of its claim before it cancels them. Keep it well under sarama's
	// Consumer.Group.Rebalance.Timeout.
	DrainTimeout time.Duration
	// MaxAttempts is the number of handler attempts before an unclassified
	// failure or a panic is dead-lettered. Transient failures are retried
	// without limit (with backoff up to BackoffMax); permanent ones are
	// dead-lettered at once.
	MaxAttempts int
	// BackoffMin and BackoffMax bound the exponential backoff between attempts
	// and between dead-letter write retries.
	BackoffMin, BackoffMax time.Duration
	// ConsumerGroup is written into dead-letter envelopes.
	ConsumerGroup string
}

// DefaultSettings returns the defaults documented in docs/configuration.md.
func DefaultSettings() Settings {
	return Settings{
		InFlightPerPartition: 64,
		InFlightTotal:        1024,
		Ordering:             ordering.ByKey,
		DrainTimeout:         20 * time.Second,
		MaxAttempts:          5,
		BackoffMin:           100 * time.Millisecond,
		BackoffMax:           10 * time.Second,
	}
}

// Validate returns an error naming the first invalid setting.
func (s Settings) Validate() error {
	var errs []error
	if s.InFlightPerPartition < 1 {
		errs = append(errs, fmt.Errorf("in-flight per partition must be at least 1, got %d", s.InFlightPerPartition))
	}
	if s.InFlightTotal < 1 {
		errs = append(errs, fmt.Errorf("in-flight total must be at least 1, got %d", s.InFlightTotal))
	}
	if s.Ordering < ordering.ByKey || s.Ordering > ordering.Unordered {
		errs = append(errs, fmt.Errorf("unknown ordering %v", s.Ordering))
	}
	if s.DrainTimeout <= 0 {
		errs = append(errs, fmt.Errorf("drain timeout must be positive, got %v", s.DrainTimeout))
	}
	if s.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts must be at least 1, got %d", s.MaxAttempts))
	}
	if s.BackoffMin <= 0 || s.BackoffMax < s.BackoffMin {
		errs = append(errs, fmt.Errorf("backoff must satisfy 0 < min <= max, got min %v max %v", s.BackoffMin, s.BackoffMax))
	}
	return errors.Join(errs...)
}
