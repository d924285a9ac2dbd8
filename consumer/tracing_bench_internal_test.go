package consumer

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// untracedAdapter is the adapter as it was before tracing, for the
// benchmark's baseline.
type untracedAdapter struct{ h Handler }

func (a untracedAdapter) Handle(ctx context.Context, r *messages.Record) error {
	rec := recordOf(r)
	return a.h.Handle(ctx, &rec)
}

// What tracing costs per attempt, beside the handler: the adapter as it was
// before tracing, off (no provider), a provider that records nothing
// (noop), the SDK sampling no span, and the SDK sampling every span into
// nothing. Run: go test ./consumer -run '^$' -bench Tracing -benchmem
func BenchmarkTracing(b *testing.B) {
	h := HandlerFunc(func(context.Context, *Record) error { return nil })
	r := &messages.Record{Topic: "events", Partition: 3, Offset: 42, Key: []byte("host-1"), Value: make([]byte, 1024),
		Headers: []*messages.Header{{Key: []byte("traceparent"), Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}
	b.Run("the adapter before tracing", func(b *testing.B) {
		var a actors.Handler = untracedAdapter{h}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := a.Handle(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name string
		t    *tracing
	}{
		{"off", nil},
		{"noop provider", newTracing(noop.NewTracerProvider(), "g")},
		{"sdk, no span sampled", newTracing(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())), "g")},
		{"sdk, every span sampled", newTracing(sdktrace.NewTracerProvider(), "g")},
	} {
		b.Run(c.name, func(b *testing.B) {
			a := adapt(h, c.t, nil)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := a.Handle(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
