package consumer

import (
	"context"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/pipeline"
	"github.com/patchflow/patchflow/messages"
)

// WithTracerProvider traces each handler attempt with OpenTelemetry: a
// consumer span "process <topic>" per attempt, its parent the W3C
// traceparent (and tracestate) of the record's headers when it has one,
// with OpenTelemetry's messaging attributes (system kafka, operation
// process, destination, partition, offset, consumer group, and the key
// when it is UTF-8 of at most 256 bytes) and the attempt
// ("patchflow.attempt"). A retry (attempt 2 on) starts with the event
// "retry"; a failure sets the span's status to Error with the failure's
// text, a skip adds the event "skipped" with its reason, a panic the event
// "panic". Each dead letter gets a span "dead-letter <topic>" under the
// same parent, with the event "dead-lettered" and the failure. The
// handler's ctx carries the attempt's span: a call the handler makes under
// it is its child, and so is each call a DependencyReporter reports (a
// client span named after the dependency, from the call's start to its
// end, its status Error when the dependency gave no answer). Without this
// option nothing is traced and nothing is spent on it.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return Option{func(o *pipeline.Options) { o.TracerProvider = tp }}
}

// tracerName is the instrumentation scope of the consumer's spans.
const tracerName = "github.com/patchflow/patchflow/consumer"

// maxKeyAttribute bounds the key recorded on a span.
const maxKeyAttribute = 256

// tracing starts and ends the consumer's spans; nil traces nothing.
type tracing struct {
	tracer trace.Tracer
	group  string
	prop   propagation.TextMapPropagator
}

func newTracing(tp trace.TracerProvider, group string) *tracing {
	if tp == nil {
		return nil
	}
	return &tracing{tracer: tp.Tracer(tracerName), group: group, prop: propagation.TraceContext{}}
}

// headerCarrier reads a record's headers as a propagation carrier.
type headerCarrier []Header

func (h headerCarrier) Get(key string) string {
	for _, x := range h {
		if string(x.Key) == key {
			return string(x.Value)
		}
	}
	return ""
}

func (h headerCarrier) Set(string, string) {}

func (h headerCarrier) Keys() []string {
	out := make([]string, len(h))
	for i, x := range h {
		out[i] = string(x.Key)
	}
	return out
}

// attributes are a record's messaging attributes.
func (t *tracing) attributes(r *Record) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(r.Topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(r.Partition))),
		semconv.MessagingKafkaOffset(int(r.Offset)),
		semconv.MessagingConsumerGroupName(t.group),
	}
	if len(r.Key) > 0 && len(r.Key) <= maxKeyAttribute && utf8.Valid(r.Key) {
		attrs = append(attrs, semconv.MessagingKafkaMessageKey(string(r.Key)))
	}
	return attrs
}

// handle runs one attempt of h on r inside its span.
func (t *tracing) handle(ctx context.Context, h Handler, r *Record) (err error) {
	parent := t.prop.Extract(ctx, headerCarrier(r.Headers))
	ctx, span := t.tracer.Start(parent, "process "+r.Topic, trace.WithSpanKind(trace.SpanKindConsumer))
	if !span.IsRecording() { // not sampled, or a provider that records nothing: spend no more
		defer span.End()
		return h.Handle(ctx, r)
	}
	attempt, _ := actors.AttemptOf(ctx)
	span.SetAttributes(append(t.attributes(r), attribute.Int("patchflow.attempt", int(attempt)))...)
	if attempt > 1 {
		span.AddEvent("retry", trace.WithAttributes(attribute.Int("patchflow.attempt", int(attempt))))
	}
	defer func() {
		if v := recover(); v != nil {
			span.AddEvent("panic", trace.WithAttributes(attribute.String("panic", actors.PanicValue(v))))
			span.SetStatus(codes.Error, "handler panicked")
			span.End()
			panic(v)
		}
		if reason, ok := messages.SkipReasonOf(err); ok {
			span.AddEvent("skipped", trace.WithAttributes(attribute.String("reason", string(reason))))
		} else if err != nil {
			span.SetStatus(codes.Error, err.Error())
			if errors.Is(err, context.Canceled) {
				span.AddEvent("cancelled")
			}
		}
		span.End()
	}()
	return h.Handle(ctx, r)
}

// deadLettered records a dead letter of r, for failure, as its own span.
func (t *tracing) deadLettered(ctx context.Context, r *Record, failure string, write func(context.Context) error) error {
	parent := t.prop.Extract(ctx, headerCarrier(r.Headers))
	_, span := t.tracer.Start(parent, "dead-letter "+r.Topic, trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	if !span.IsRecording() {
		return write(ctx)
	}
	span.SetAttributes(t.attributes(r)...)
	span.AddEvent("dead-lettered", trace.WithAttributes(attribute.String("failure", failure)))
	err := write(ctx)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// call records a dependency call the handler reported, under the span ctx
// carries (its attempt's), as a client span that ended as it was reported.
func (t *tracing) call(ctx context.Context, dependency string, took time.Duration, err error) {
	if t == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	end := time.Now()
	_, span := t.tracer.Start(ctx, dependency, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(end.Add(-took)),
		trace.WithAttributes(attribute.String("patchflow.dependency", dependency)))
	if ok, counts := served(err); !ok && counts {
		span.SetStatus(codes.Error, err.Error())
	} else if err != nil {
		span.AddEvent("refused or cancelled", trace.WithAttributes(attribute.String("error", err.Error())))
	}
	span.End(trace.WithTimestamp(end))
}

// batch starts the span of a batch's HandleBatch call, linked to each
// record's attempt span, in ctx; end ends it. Without tracing it does
// nothing.
func (t *tracing) batch(ctx context.Context, items []*batchItem) (context.Context, func(*batchPanic)) {
	if t == nil {
		return ctx, func(*batchPanic) {}
	}
	links := make([]trace.Link, 0, len(items))
	for _, it := range items {
		if sc := trace.SpanFromContext(it.ctx).SpanContext(); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := t.tracer.Start(ctx, "batch", trace.WithSpanKind(trace.SpanKindInternal), trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("patchflow.batch.records", len(items))))
	return ctx, func(p *batchPanic) {
		if p != nil {
			span.AddEvent("panic", trace.WithAttributes(attribute.String("panic", p.value)))
			span.SetStatus(codes.Error, "the batch handler panicked")
		}
		span.End()
	}
}
