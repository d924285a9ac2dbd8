package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// NewActorSystem returns an actor system whose own logs go to logger (under
// component=protoactor, Warn and above only: protoactor reports every dead
// letter and every supervised failure at Info, and the partition actor
// already logs those with the record they concern).
func NewActorSystem(logger *slog.Logger) *actor.ActorSystem {
	quiet := slog.New(minLevel{logger.Handler(), slog.LevelWarn}).With("component", "protoactor")
	return actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(10*time.Second),
	)
}

// minLevel drops records below level before they reach the wrapped handler.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.level}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.level}
}
