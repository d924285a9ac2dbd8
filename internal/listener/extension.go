package listener

import (
	"context"
	"log/slog"
	"strings"

	"github.com/patchflow/patchflow/internal/settings"
)

// Extension adds to a build of the listener what the product does not ship.
// The product binary (cmd/listener) has none; the proving ground's build
// (cmd/listener-proving) adds the simulated handler and the in-process
// broker, so that the production binary links neither kfake nor the
// simulated downstream.
type Extension struct {
	// Handler is the LISTENER_HANDLER value this extension serves ("":
	// none), HandlerHelp its line in that setting's usage.
	Handler, HandlerHelp string
	// Register adds the extension's settings; Check judges them once
	// everything is parsed (the handler chosen included).
	Register func(s *settings.Set)
	Check    func(s *settings.Set, cfg *Config) error
	// NewDomain builds the handler named Handler.
	NewDomain func(ctx context.Context, cfg *Config, logger *slog.Logger) (*Domain, error)
	// Embedded, when set, starts an in-process broker holding topic, for
	// KAFKA_BROKERS=embedded; stop ends it.
	Embedded func(topic string) (brokers []string, stop func(), err error)
	// EmbeddedHelp is how KAFKA_BROKERS's usage names the embedded broker.
	EmbeddedHelp string
}

// handlerNames returns the LISTENER_HANDLER values the build offers and
// the usage text of those beyond evaluate.
func handlerNames(exts []Extension) ([]string, string) {
	names := []string{"evaluate"}
	var help strings.Builder
	for _, e := range exts {
		if e.Handler != "" {
			names = append(names, e.Handler)
			help.WriteString(". `" + e.Handler + "`: " + e.HandlerHelp)
		}
	}
	return names, help.String()
}

// embedded returns the extension that provides an in-process broker, or nil.
func embedded(exts []Extension) *Extension {
	for i := range exts {
		if exts[i].Embedded != nil {
			return &exts[i]
		}
	}
	return nil
}

// embeddedUsage is KAFKA_BROKERS's usage for the embedded broker, when the
// build has one.
func embeddedUsage(exts []Extension) string {
	if e := embedded(exts); e != nil {
		return ", or `embedded` for " + e.EmbeddedHelp
	}
	return ""
}

// extension returns the extension serving handler, or nil.
func (c *Config) extension(handler string) *Extension {
	for i := range c.extensions {
		if c.extensions[i].Handler == handler {
			return &c.extensions[i]
		}
	}
	return nil
}
