package consumer_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
)

func review39bPanickingHandlerFrame(_ context.Context, r *consumer.Record) error {
	if string(r.Value) == "v" {
		panic(strings.Repeat("x", 64<<10))
	}
	time.Sleep(20 * time.Millisecond)
	return nil
}

// With tracing, a handler's panic is recovered and raised again by the
// tracing wrapper: the dead letter must still carry the handler's frame,
// and the span's panic event must quote the value bounded as the failure
// is (MaxPanicValueBytes, 1 KiB), not 64 KiB per attempt.
func TestReview39bTracedPanicKeepsStackAndBoundsValue(t *testing.T) {
	broker, err := embedded.Start(1, "tpanic")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	var ks, vs []string
	for i := range 40 {
		ks, vs = append(ks, "g"+strings.Repeat("x", i%8)), append(vs, "ok")
		if i == 0 {
			ks, vs = append(ks, "k"), append(vs, "v")
		}
	}
	produce(t, broker.Addrs(), "tpanic", ks, vs)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "tpanic", Group: "tpanic", MaxAttempts: 1, BackoffMin: 10 * time.Millisecond},
		consumer.HandlerFunc(review39bPanickingHandlerFrame), consumer.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "dead-lettered", 20*time.Second, func() bool { return c.Stats().DeadLettered == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	letter := readDeadLetter(t, broker.Addrs(), "tpanic.dlq")
	if !strings.Contains(letter.GetError(), "review39bPanickingHandlerFrame") {
		t.Errorf("the dead letter's failure does not name the handler's frame:\n%s", letter.GetError())
	}
	for _, s := range spans.Ended() {
		for _, e := range s.Events() {
			if e.Name != "panic" {
				continue
			}
			for _, a := range e.Attributes {
				if n := len(a.Value.String()); n > 2048 {
					t.Errorf("span %q's panic event quotes %d bytes of the panic's value (the failure keeps 1 KiB)", s.Name(), n)
				}
			}
		}
	}
}

// review39bReportingBatch reports one call per HandleBatch under its ctx.
type review39bReportingBatch struct {
	report  func(context.Context, string, time.Duration, error)
	mu      sync.Mutex
	ctxSpan []bool // HandleBatch's ctx carries a span
	calls   atomic.Int32
}

func (h *review39bReportingBatch) ReportDependenciesTo(report func(context.Context, string, time.Duration, error)) {
	h.report = report
}

func (h *review39bReportingBatch) Handle(ctx context.Context, r *consumer.Record) error {
	return h.HandleBatch(ctx, []*consumer.Record{r})[0]
}

func (h *review39bReportingBatch) HandleBatch(ctx context.Context, rs []*consumer.Record) []error {
	if len(rs) > 1 {
		h.mu.Lock()
		h.ctxSpan = append(h.ctxSpan, trace.SpanFromContext(ctx).SpanContext().IsValid())
		h.mu.Unlock()
		h.calls.Add(1)
	}
	h.report(ctx, "db", time.Millisecond, nil) // the bulk write
	return make([]error, len(rs))
}

// With tracing and batches, the calls a DependencyReporter reports under
// HandleBatch's ctx are to become client spans ("each call ... becomes a
// client span under its attempt"); the batch's ctx carries no span, so
// they vanish.
func TestReview39bBatchCallsAreNotTraced(t *testing.T) {
	broker, err := embedded.Start(1, "tbatch")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	produce(t, broker.Addrs(), "tbatch", []string{"a", "b", "c", "d"}, []string{"1", "2", "3", "4"})
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	h := &review39bReportingBatch{}
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "tbatch", Group: "tbatch", BatchSize: 8, BatchLinger: 100 * time.Millisecond},
		h, consumer.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "handled", 20*time.Second, func() bool { return c.Stats().Succeeded == 4 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if h.calls.Load() == 0 {
		t.Skip("no batch of several formed")
	}
	var process, db int
	for _, s := range spans.Ended() {
		switch s.Name() {
		case "process tbatch":
			process++
		case "db":
			db++
		}
	}
	if db == 0 {
		t.Fatalf("%d attempt spans, %d batch calls, 0 spans of the reported calls (HandleBatch's ctx carries a span: %v)", process, h.calls.Load(), h.ctxSpan)
	}
}
