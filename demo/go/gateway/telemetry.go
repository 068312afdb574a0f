package main

import (
	"context"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// defaultServiceName names the gateway's spans unless OTEL_SERVICE_NAME says otherwise.
const defaultServiceName = "a2a-go-gateway"

// setupTracing exports the spans of the gateway's outgoing A2A calls (otela2a's interceptor)
// by OTLP when the environment names an OTLP endpoint, with the OpenTelemetry SDK's variables:
// OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL (http/protobuf,
// else grpc: the default of the demo's Python processes, opentelemetry-distro's, so that one
// endpoint serves them all), OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_*; OTEL_SDK_DISABLED=true
// or an OTEL_TRACES_EXPORTER without otlp turn it off. The caller's trace context (W3C
// traceparent) is then continued: the gateway's call is a child of the caller's, and the
// worker's a child of the gateway's. Without an endpoint nothing is set up: the interceptor
// records nothing and the caller's traceparent passes as it came. The returned func flushes
// what is left on the way out.
func setupTracing() func() {
	if !tracingWanted() {
		return func() {}
	}
	ctx := context.Background()
	var exporter sdktrace.SpanExporter
	var err error
	if strings.HasPrefix(otlpProtocol(), "http") { // http/protobuf (http/json: protobuf too)
		exporter, err = otlptracehttp.New(ctx)
	} else {
		exporter, err = otlptracegrpc.New(ctx)
	}
	if err != nil {
		logf("tracing off: the OTLP exporter could not be made (%v)", err)
		return func() {}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(defaultServiceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		logf("tracing: resource from the environment incomplete (%v)", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{}, propagation.Baggage{}))
	logf("tracing: outgoing A2A calls exported by OTLP (%s)", otlpProtocol())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			logf("tracing: spans left unexported at exit (%v)", err)
		}
	}
}

func tracingWanted() bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if exporters := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exporters != "" &&
		!strings.Contains(exporters, "otlp") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

func otlpProtocol() string {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			return v
		}
	}
	return "grpc"
}
