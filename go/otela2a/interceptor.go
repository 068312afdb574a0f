package otela2a

import (
	"context"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Interceptor is an a2aclient.CallInterceptor that records each A2A call of an a2a-go client
// as the convention's client span. It never fails a call: its own failures are counted on the
// otel_a2a.instrumentation.errors counter and the call goes on.
type Interceptor struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	binding    a2a.TransportProtocol
	failures   metric.Int64Counter
}

var _ a2aclient.CallInterceptor = (*Interceptor)(nil)

// Option configures an Interceptor.
type Option func(*config)

type config struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	propagator     propagation.TextMapPropagator
	binding        a2a.TransportProtocol
}

// WithTracerProvider sets the TracerProvider (default: the global one, otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracerProvider = tp }
}

// WithMeterProvider sets the MeterProvider of the failure counter (default: the global one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meterProvider = mp }
}

// WithPropagators sets the propagator that writes the span's context into each call's service
// parameters, which a2a-go sends as HTTP headers or gRPC metadata (default: the global one,
// otel.GetTextMapPropagator, which propagates nothing until the application sets one).
func WithPropagators(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = p }
}

// WithBinding names the binding of the client's calls, for error.type (a JSON-RPC error
// code on JSON-RPC). A client made from a card needs none: the binding is the card's
// interface the client selected.
func WithBinding(b a2a.TransportProtocol) Option {
	return func(c *config) { c.binding = b }
}

// NewInterceptor returns the interceptor; give it to an a2a-go client factory:
//
//	client, err := a2aclient.NewFromCard(ctx, card,
//		a2aclient.WithCallInterceptors(otela2a.NewInterceptor()))
func NewInterceptor(opts ...Option) *Interceptor {
	c := config{}
	for _, opt := range opts {
		opt(&c)
	}
	if c.tracerProvider == nil {
		c.tracerProvider = otel.GetTracerProvider()
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	if c.propagator == nil {
		c.propagator = otel.GetTextMapPropagator()
	}
	i := &Interceptor{
		tracer: c.tracerProvider.Tracer(ScopeName,
			trace.WithInstrumentationVersion(Version), trace.WithSchemaURL(SchemaURL)),
		propagator: c.propagator,
		binding:    c.binding,
	}
	meter := c.meterProvider.Meter(ScopeName,
		metric.WithInstrumentationVersion(Version), metric.WithSchemaURL(SchemaURL))
	// a meter that cannot make the counter gives a no-op one with the error: nothing to count on
	i.failures, _ = meter.Int64Counter(metricErrors, metric.WithUnit("{error}"),
		metric.WithDescription("Failures of otel-a2a's Go interceptor; the A2A call went on unobserved."))
	return i
}

type callKey struct{}

// Before starts the call's span, a child of the context's span, and writes its context into
// the call's service parameters.
func (i *Interceptor) Before(ctx context.Context, req *a2aclient.Request) (out context.Context, _ any, _ error) {
	out = ctx
	defer i.recover(ctx)
	name := methodName(req.Method)
	stream := name == "SendStreamingMessage" || name == "SubscribeToTask"
	c := &call{stream: stream, binding: i.bindingOf(req), payload: req.Payload}
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs, attribute.String(attrMethodName, name))
	if v := protocolVersion(req.ServiceParams); v != "" {
		attrs = append(attrs, attribute.String(attrProtocol, v))
	}
	if host, port := serverAddress(req.BaseURL); host != "" && len(host) <= maxValueLen {
		attrs = append(attrs, attribute.String(attrServerAddress, host))
		if port > 0 {
			attrs = append(attrs, attribute.Int(attrServerPort, port))
		}
	}
	attrs = append(attrs, cardAttributes(req.Card)...)
	attrs = c.request(attrs)
	spanCtx, span := i.tracer.Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if req.ServiceParams != nil {
		i.propagator.Inject(spanCtx, paramsCarrier(req.ServiceParams))
	}
	if !span.IsRecording() {
		return spanCtx, nil, nil
	}
	c.span = span
	if stream {
		// a2a-go tells an interceptor of each event, never of a stream's end: a stream that
		// stops before a terminal or interrupted state, or that the caller leaves, ends its
		// span when the caller's context is done
		c.mu.Lock() // the func may run at once, the context being done already
		c.stop = context.AfterFunc(ctx, func() { i.guard(ctx, c.abandoned) })
		c.mu.Unlock()
	}
	return context.WithValue(spanCtx, callKey{}, c), nil, nil
}

// After records a reply, a streamed event or an error, and ends the span with the call.
func (i *Interceptor) After(ctx context.Context, resp *a2aclient.Response) error {
	defer i.recover(ctx)
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		c.reply(resp)
	}
	return nil
}

func (i *Interceptor) bindingOf(req *a2aclient.Request) a2a.TransportProtocol {
	if i.binding != "" {
		return i.binding
	}
	if req.Card != nil {
		for _, iface := range req.Card.SupportedInterfaces {
			if iface != nil && iface.URL == req.BaseURL {
				return iface.ProtocolBinding
			}
		}
	}
	return ""
}

// recover keeps a failure of the interceptor from reaching the caller, and counts it.
func (i *Interceptor) recover(ctx context.Context) {
	if r := recover(); r != nil {
		i.failed(ctx, r)
	}
}

func (i *Interceptor) guard(ctx context.Context, f func()) {
	defer i.recover(ctx)
	f()
}

func (i *Interceptor) failed(ctx context.Context, r any) {
	kind := fmt.Sprintf("%T", r)
	if err, ok := r.(error); ok {
		kind = errorType(err, "")
	}
	i.failures.Add(context.WithoutCancel(ctx), 1,
		metric.WithAttributes(attribute.String(attrErrorType, kind)))
}

// protocolVersion: the A2A-Version service parameter a2a-go's client sets on every call.
func protocolVersion(params a2aclient.ServiceParams) string {
	for k, v := range params {
		if strings.EqualFold(k, a2a.SvcParamVersion) && len(v) > 0 && len(v[0]) <= 32 {
			return v[0]
		}
	}
	return ""
}

// cardAttributes: the target agent's name, version and description from its card.
func cardAttributes(card *a2a.AgentCard) []attribute.KeyValue {
	if card == nil {
		return nil
	}
	var out []attribute.KeyValue
	for _, kv := range []struct{ key, value string }{
		{attrAgentName, card.Name}, {attrAgentVersion, card.Version}, {attrAgentDesc, card.Description},
	} {
		if kv.value != "" && len(kv.value) <= maxValueLen {
			out = append(out, attribute.String(kv.key, kv.value))
		}
	}
	return out
}

// paramsCarrier writes propagation fields into a call's service parameters, replacing any
// the caller passed under the same name in another case.
type paramsCarrier a2aclient.ServiceParams

func (p paramsCarrier) Get(key string) string {
	for k, v := range p {
		if strings.EqualFold(k, key) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

func (p paramsCarrier) Set(key, value string) {
	for k := range p {
		if strings.EqualFold(k, key) {
			delete(p, k)
		}
	}
	p[strings.ToLower(key)] = []string{value}
}

func (p paramsCarrier) Keys() []string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	return keys
}
