package consumer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
)

// Each attempt is a span under the record's traceparent, with the
// messaging attributes; a retry starts with its event, a failure sets the
// status, a dead letter has its span; a record without traceparent starts
// a trace; the handler's calls under its ctx are children.
func TestEachAttemptIsASpanUnderTheRecordsTrace(t *testing.T) {
	broker, err := embedded.Start(1, "traced")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	p, err := sarama.NewSyncProducer(broker.Addrs(), func() *sarama.Config {
		c := sarama.NewConfig()
		c.Producer.Return.Successes = true
		c.Version = sarama.V3_6_0_0
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*sarama.ProducerMessage{
		{Topic: "traced", Key: sarama.StringEncoder("k1"), Value: sarama.StringEncoder("flaky"),
			Headers: []sarama.RecordHeader{{Key: []byte("traceparent"), Value: []byte("00-" + parentTrace + "-" + parentSpan + "-01")}}},
		{Topic: "traced", Key: sarama.StringEncoder("k2"), Value: sarama.StringEncoder("poison")},
	} {
		if _, _, err := p.SendMessage(m); err != nil {
			t.Fatal(err)
		}
	}
	_ = p.Close()

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	var flaky atomic.Int32
	h := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		_, child := tp.Tracer("test").Start(ctx, "call")
		child.End()
		switch string(r.Value) {
		case "flaky":
			if flaky.Add(1) == 1 {
				return consumer.FailedIn("db", errors.New("deadlock"))
			}
			return nil
		default:
			return consumer.Permanent(errors.New("not a number"))
		}
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "traced", Group: "tracing", BackoffMin: 10 * time.Millisecond},
		h, consumer.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "both records finished", 20*time.Second, func() bool { s := c.Stats(); return s.Succeeded == 1 && s.DeadLettered == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	var process, deadLetter, calls []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		switch s.Name() {
		case "process traced":
			process = append(process, s)
		case "dead-letter traced":
			deadLetter = append(deadLetter, s)
		case "call":
			calls = append(calls, s)
		}
	}
	if len(process) != 3 || len(deadLetter) != 1 || len(calls) != 3 {
		t.Fatalf("%d attempt spans, %d dead-letter spans, %d calls: want 3, 1, 3", len(process), len(deadLetter), len(calls))
	}
	attempts := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range process {
		a := attrs(s)
		if a["messaging.system"] != "kafka" || a["messaging.destination.name"] != "traced" || a["messaging.destination.partition.id"] != "0" ||
			a["messaging.consumer.group.name"] != "tracing" || a["messaging.operation.type"] != "process" || s.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("attempt span attributes %v, kind %v", a, s.SpanKind())
		}
		attempts[a["messaging.kafka.message.key"]] = append(attempts[a["messaging.kafka.message.key"]], s)
	}
	k1 := attempts["k1"]
	if len(k1) != 2 {
		t.Fatalf("k1 had %d attempt spans, want 2", len(k1))
	}
	for i, s := range k1 {
		if s.Parent().TraceID().String() != parentTrace || s.Parent().SpanID().String() != parentSpan || !s.Parent().IsRemote() {
			t.Errorf("k1's attempt %d has parent %v, want the record's traceparent", i+1, s.Parent())
		}
		a := attrs(s)
		if a["patchflow.attempt"] != []string{"1", "2"}[i] {
			t.Errorf("k1's span %d says attempt %s", i, a["patchflow.attempt"])
		}
	}
	first, second := k1[0], k1[1]
	if attrs(first)["patchflow.attempt"] == "2" {
		first, second = second, first
	}
	if first.Status().Code != codes.Error || first.Status().Description != "deadlock" || second.Status().Code == codes.Error {
		t.Errorf("statuses %v then %v: want the failure, then none", first.Status(), second.Status())
	}
	if !hasEvent(second, "retry") || hasEvent(first, "retry") {
		t.Error("the retry event is not on the second attempt alone")
	}
	k2 := attempts["k2"]
	if len(k2) != 1 || k2[0].Parent().IsValid() {
		t.Fatalf("k2, without traceparent: %d spans, parent %v; want one root span", len(k2), k2[0].Parent())
	}
	d := deadLetter[0]
	if !hasEvent(d, "dead-lettered") || d.SpanContext().TraceID() == k1[0].SpanContext().TraceID() || d.Parent().IsValid() {
		t.Errorf("the dead letter's span %v: want its own root (k2 has no traceparent) with the event", d.Events())
	}
	for _, call := range calls {
		if !call.Parent().IsValid() || call.Parent().IsRemote() {
			t.Errorf("a handler's call span has parent %v, want its attempt's span", call.Parent())
		}
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) bool {
	for _, e := range s.Events() {
		if e.Name == name {
			return true
		}
	}
	return false
}

// The calls a handler reports become client spans under their attempt's,
// from the call's start to its end.
func TestReportedCallsAreChildSpans(t *testing.T) {
	broker, err := embedded.Start(1, "calls")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	if err := broker.Produce("calls", "k", "v"); err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	var report func(context.Context, string, time.Duration, error)
	h := struct {
		consumer.HandlerFunc
		reporterFunc
	}{
		HandlerFunc: func(ctx context.Context, _ *consumer.Record) error {
			report(ctx, "vmaas", 30*time.Millisecond, nil)
			report(ctx, "database", 5*time.Millisecond, consumer.Transient(errors.New("no connection")))
			report(context.Background(), "database", time.Millisecond, nil) // not the record's: no span
			return nil
		},
		reporterFunc: func(f func(context.Context, string, time.Duration, error)) { report = f },
	}
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "calls", Group: "calls"}, h, consumer.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "the record handled", 20*time.Second, func() bool { return c.Stats().Succeeded == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		if _, dup := byName[s.Name()]; dup {
			t.Fatalf("two spans named %q", s.Name())
		}
		byName[s.Name()] = s
	}
	attempt, vmaas, db := byName["process calls"], byName["vmaas"], byName["database"]
	if attempt == nil || vmaas == nil || db == nil || len(byName) != 3 {
		t.Fatalf("spans %v: want the attempt, vmaas and database", byName)
	}
	for _, s := range []sdktrace.ReadOnlySpan{vmaas, db} {
		if s.Parent().SpanID() != attempt.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: parent %v kind %v, want the attempt's span, client", s.Name(), s.Parent().SpanID(), s.SpanKind())
		}
	}
	if d := vmaas.EndTime().Sub(vmaas.StartTime()); d != 30*time.Millisecond {
		t.Errorf("the vmaas span lasts %v, the call took 30ms", d)
	}
	if db.Status().Code != codes.Error || vmaas.Status().Code == codes.Error {
		t.Errorf("statuses: database %v, vmaas %v; want the failure on database alone", db.Status(), vmaas.Status())
	}
}
