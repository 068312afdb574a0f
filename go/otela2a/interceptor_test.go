package otela2a

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// endSignal hands each ended span to the test, which waits on it instead of sleeping.
type endSignal chan sdktrace.ReadOnlySpan

func (e endSignal) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e endSignal) OnEnd(s sdktrace.ReadOnlySpan)                   { e <- s }
func (e endSignal) Shutdown(context.Context) error                  { return nil }
func (e endSignal) ForceFlush(context.Context) error                { return nil }

type harness struct {
	spans *tracetest.SpanRecorder
	ended endSignal
	tp    *sdktrace.TracerProvider
}

func newHarness() *harness {
	h := &harness{spans: tracetest.NewSpanRecorder(), ended: make(endSignal, 64)}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans), sdktrace.WithSpanProcessor(h.ended))
	return h
}

func (h *harness) interceptor(opts ...Option) *Interceptor {
	return NewInterceptor(append([]Option{
		WithTracerProvider(h.tp), WithPropagators(propagation.TraceContext{}),
	}, opts...)...)
}

// client is an a2a-go client of the peer's card over binding, with the interceptor: the three
// lines a Go service adds are the WithCallInterceptors option.
func (h *harness) client(t *testing.T, p *peer, binding a2a.TransportProtocol, opts ...Option) *a2aclient.Client {
	t.Helper()
	c, err := a2aclient.NewFromCard(t.Context(), p.card,
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}),
		grpcv1.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())),
		a2aclient.WithCallInterceptors(h.interceptor(opts...)),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// only is the one ended span, which the test's calls made.
func (h *harness) only(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	ended := h.spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	return ended[0]
}

func attrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	out := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value
	}
	return out
}

func eventAttrs(e sdktrace.Event) map[string]string {
	out := map[string]string{}
	for _, kv := range e.Attributes {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// expect checks that the span has exactly these attributes, with these values.
func expect(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]any) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: no %s (want %v)", s.Name(), k, v)
		case !reflectEqual(g, v):
			t.Errorf("%s: %s = %v (%s), want %v", s.Name(), k, g.Emit(), g.Type(), v)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s = %s", s.Name(), k, g.Emit())
		}
	}
}

func reflectEqual(g attribute.Value, want any) bool {
	switch w := want.(type) {
	case string:
		return g.Type() == attribute.STRING && g.AsString() == w
	case int:
		return g.Type() == attribute.INT64 && g.AsInt64() == int64(w)
	case []string:
		return g.Type() == attribute.STRINGSLICE && slices.Equal(g.AsStringSlice(), w)
	}
	return false
}

func userMessage(words string) *a2a.Message {
	return a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(words))
}

func hostPort(t *testing.T, raw string) (string, int) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), port
}

func (p *peer) cardAttrs() map[string]any {
	return map[string]any{
		"gen_ai.agent.name":        p.card.Name,
		"gen_ai.agent.version":     p.card.Version,
		"gen_ai.agent.description": p.card.Description,
	}
}

func merge(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestSendMessageSpan(t *testing.T) {
	p := startPeer(t)
	h := newHarness()
	c := h.client(t, p, a2a.TransportProtocolJSONRPC)
	msg := userMessage("echo hello")
	msg.ReferenceTasks = []a2a.TaskID{"task-before"}
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("reply %T, want a task", res)
	}
	s := h.only(t)
	host, port := hostPort(t, p.base)
	if s.Name() != "SendMessage" || s.SpanKind() != trace.SpanKindClient {
		t.Errorf("span %q of kind %v, want SendMessage, client", s.Name(), s.SpanKind())
	}
	expect(t, s, merge(p.cardAttrs(), map[string]any{
		"a2a.method.name":                "SendMessage",
		"a2a.protocol.version":           "1.0",
		"a2a.message.id":                 msg.ID,
		"a2a.message.reference_task_ids": []string{"task-before"},
		"a2a.task.id":                    string(task.ID),
		"a2a.task.state":                 "TASK_STATE_COMPLETED",
		"gen_ai.conversation.id":         task.ContextID,
		"server.address":                 host,
		"server.port":                    port,
	}))
	if s.Status().Code != codes.Unset {
		t.Errorf("status %v, want unset", s.Status())
	}
	scope := s.InstrumentationScope()
	if scope.Name != ScopeName || scope.Version != Version || scope.SchemaURL != SchemaURL {
		t.Errorf("scope %+v", scope)
	}
	if len(s.Events()) != 0 {
		t.Errorf("a unary call's span has events: %v", s.Events())
	}
	// the peer received the span's context: its calls are the span's children
	want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
	if got := p.lastTraceparent(); got != want {
		t.Errorf("traceparent at the peer %q, want %q", got, want)
	}
}

func TestGetTaskAndCancelTask(t *testing.T) {
	p := startPeer(t)
	for _, binding := range []a2a.TransportProtocol{
		a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC,
	} {
		t.Run(string(binding), func(t *testing.T) {
			h := newHarness()
			c := h.client(t, p, binding)
			res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage("input please")})
			if err != nil {
				t.Fatal(err)
			}
			task := res.(*a2a.Task)
			if _, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID}); err != nil {
				t.Fatal(err)
			}
			canceled, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			if canceled.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("peer answered %s to the cancel", canceled.Status.State)
			}
			spans := h.spans.Ended()
			if len(spans) != 3 {
				t.Fatalf("%d spans, want 3", len(spans))
			}
			host, port := serverAddress(p.interfaceURL(binding))
			common := merge(p.cardAttrs(), map[string]any{
				"a2a.protocol.version": "1.0",
				"a2a.task.id":          string(task.ID),
				"server.address":       host,
				"server.port":          port,
			})
			expect(t, spans[0], merge(common, map[string]any{
				"a2a.method.name":        "SendMessage",
				"a2a.message.id":         task.History[0].ID,
				"a2a.task.state":         "TASK_STATE_INPUT_REQUIRED",
				"gen_ai.conversation.id": task.ContextID,
			}))
			for i, method := range []string{"GetTask", "CancelTask"} {
				s := spans[i+1]
				if s.Name() != method || s.SpanKind() != trace.SpanKindClient {
					t.Errorf("span %q of kind %v, want %s, client", s.Name(), s.SpanKind(), method)
				}
			}
			expect(t, spans[1], merge(common, map[string]any{
				"a2a.method.name":        "GetTask",
				"a2a.task.state":         "TASK_STATE_INPUT_REQUIRED",
				"gen_ai.conversation.id": task.ContextID,
			}))
			expect(t, spans[2], merge(common, map[string]any{
				"a2a.method.name":        "CancelTask",
				"a2a.task.state":         "TASK_STATE_CANCELED",
				"gen_ai.conversation.id": task.ContextID,
			}))
		})
	}
}

func TestStreamingSpan(t *testing.T) {
	p := startPeer(t)
	for _, binding := range []a2a.TransportProtocol{
		a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC,
	} {
		t.Run(string(binding), func(t *testing.T) {
			h := newHarness()
			c := h.client(t, p, binding)
			msg := userMessage("echo streamed")
			var taskID a2a.TaskID
			var contextID string
			var kinds []string
			for event, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
				if err != nil {
					t.Fatal(err)
				}
				taskID, contextID = event.TaskInfo().TaskID, event.TaskInfo().ContextID
				kinds = append(kinds, strings.TrimPrefix(strings.TrimPrefix(typeName(event), "*a2a."), "Task"))
			}
			s := h.only(t) // ended by the completed state, the context still live
			host, port := serverAddress(p.interfaceURL(binding))
			expect(t, s, merge(p.cardAttrs(), map[string]any{
				"a2a.method.name":        "SendStreamingMessage",
				"a2a.protocol.version":   "1.0",
				"a2a.message.id":         msg.ID,
				"a2a.task.id":            string(taskID),
				"a2a.task.state":         "TASK_STATE_COMPLETED",
				"gen_ai.conversation.id": contextID,
				"server.address":         host,
				"server.port":            port,
			}))
			var states []string
			for _, e := range s.Events() {
				if e.Name != "otel_a2a.task.status" {
					t.Errorf("event %q", e.Name)
					continue
				}
				a := eventAttrs(e)
				if a["a2a.task.id"] != string(taskID) || len(a) != 2 {
					t.Errorf("event attributes %v", a)
				}
				states = append(states, a["a2a.task.state"])
			}
			want := []string{"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}
			if !slices.Equal(states, want) {
				t.Errorf("streamed states %v, want %v (events %v)", states, want, kinds)
			}
		})
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *a2a.Task:
		return "*a2a.Task"
	case *a2a.TaskStatusUpdateEvent:
		return "*a2a.TaskStatusUpdateEvent"
	case *a2a.TaskArtifactUpdateEvent:
		return "*a2a.TaskArtifactUpdateEvent"
	case *a2a.Message:
		return "*a2a.Message"
	}
	return "?"
}

func TestSubscribeToTask(t *testing.T) {
	p := startPeer(t)
	h := newHarness()
	c := h.client(t, p, a2a.TransportProtocolJSONRPC)
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage("input")})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	// a follow-up on the waiting task, streamed; then the subscription sees it end
	follow := userMessage("echo more")
	follow.TaskID, follow.ContextID = task.ID, task.ContextID
	for _, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: follow}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	spans := h.spans.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	a := attrs(spans[1])
	if a["a2a.task.id"].AsString() != string(task.ID) || a["a2a.task.state"].AsString() != "TASK_STATE_COMPLETED" ||
		a["a2a.message.id"].AsString() != follow.ID {
		t.Errorf("follow-up span %v", a)
	}
	// subscribing to a finished task is refused (a2a-go: no execution to follow, TaskNotFound):
	// an error span naming the task
	for _, err := range c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: task.ID}) {
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("subscribing to a completed task: %v", err)
		}
	}
	spans = h.spans.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	s := spans[2]
	a = attrs(s)
	if s.Name() != "SubscribeToTask" || a["a2a.task.id"].AsString() != string(task.ID) ||
		a["error.type"].AsString() != "-32001" || s.Status().Code != codes.Error {
		t.Errorf("SubscribeToTask span %q %v %v", s.Name(), a, s.Status())
	}
}

func TestErrorReply(t *testing.T) {
	p := startPeer(t)
	cases := []struct {
		name    string
		binding a2a.TransportProtocol
		opts    []Option
		want    string
	}{
		{"JSON-RPC: the JSON-RPC code", a2a.TransportProtocolJSONRPC, nil, "-32001"},
		{"HTTP+JSON: the A2A error reason", a2a.TransportProtocolHTTPJSON, nil, "TASK_NOT_FOUND"},
		{"gRPC: the A2A error reason", a2a.TransportProtocolGRPC, nil, "TASK_NOT_FOUND"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			c := h.client(t, p, tc.binding, tc.opts...)
			_, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: "no-such-task"})
			if !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("error %v, want task not found", err)
			}
			s := h.only(t)
			host, port := serverAddress(p.interfaceURL(tc.binding))
			expect(t, s, merge(p.cardAttrs(), map[string]any{
				"a2a.method.name":      "GetTask",
				"a2a.protocol.version": "1.0",
				"a2a.task.id":          "no-such-task",
				"error.type":           tc.want,
				"server.address":       host,
				"server.port":          port,
			}))
			if s.Status().Code != codes.Error || s.Status().Description != tc.want {
				t.Errorf("status %+v", s.Status())
			}
		})
	}
}

// A client made from endpoints has no card: no gen_ai.agent.*, and the binding for error.type
// comes from WithBinding, else the A2A error reason stands.
func TestClientWithoutCard(t *testing.T) {
	p := startPeer(t)
	iface := a2a.NewAgentInterface(p.interfaceURL(a2a.TransportProtocolJSONRPC), a2a.TransportProtocolJSONRPC)
	for _, tc := range []struct {
		opts []Option
		want string
	}{{nil, "TASK_NOT_FOUND"}, {[]Option{WithBinding(a2a.TransportProtocolJSONRPC)}, "-32001"}} {
		h := newHarness()
		c, err := a2aclient.NewFromEndpoints(t.Context(), []*a2a.AgentInterface{iface},
			a2aclient.WithCallInterceptors(h.interceptor(tc.opts...)))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: "gone"})
		s := h.only(t)
		a := attrs(s)
		if a["error.type"].AsString() != tc.want {
			t.Errorf("error.type %q, want %q", a["error.type"].AsString(), tc.want)
		}
		if _, ok := a["gen_ai.agent.name"]; ok {
			t.Errorf("gen_ai.agent.name without a card")
		}
	}
}

// A JSON-RPC endpoint answering 503 (a proxy in front of a down agent): the HTTP status.
func TestHTTPStatusError(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "agent down", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	h := newHarness()
	iface := a2a.NewAgentInterface(down.URL, a2a.TransportProtocolJSONRPC)
	c, err := a2aclient.NewFromEndpoints(t.Context(), []*a2a.AgentInterface{iface},
		a2aclient.WithCallInterceptors(h.interceptor()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: "t-1"}); err == nil {
		t.Fatal("no error from a 503")
	}
	a := attrs(h.only(t))
	if a["error.type"].AsString() != "503" || a["a2a.task.id"].AsString() != "t-1" {
		t.Errorf("attributes %v", a)
	}
}

// A state spelled otherwise than the convention's value is recorded as that value, its
// spelling beside it.
func TestNonCanonicalState(t *testing.T) {
	p := startPeer(t)
	h := newHarness()
	c := h.client(t, p, a2a.TransportProtocolJSONRPC)
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{
		Message: userMessage("odd"), Config: &a2a.SendMessageConfig{ReturnImmediately: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	// the reply may leave before the executor stores its odd state: ask until it has, with
	// a deadline (the peer answers at once; this waits on its executor, not on time)
	var got *a2a.Task
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err = c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.State != a2a.TaskStateSubmitted || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got.Status.State != "input-required" {
		t.Fatalf("the peer stored %q", got.Status.State)
	}
	ended := h.spans.Ended()
	a := attrs(ended[len(ended)-1]) // the GetTask that read the odd state
	if a["a2a.task.state"].AsString() != "TASK_STATE_INPUT_REQUIRED" ||
		a["otel_a2a.task.state.raw"].AsString() != "input-required" {
		t.Errorf("attributes %v", a)
	}
}

func TestTenant(t *testing.T) {
	p := startPeer(t)
	// named by the request
	h := newHarness()
	c := h.client(t, p, a2a.TransportProtocolJSONRPC)
	_, _ = c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: "x", Tenant: "billing"})
	if got := attrs(h.only(t))["a2a.tenant"].AsString(); got != "billing" {
		t.Errorf("a2a.tenant %q from the request", got)
	}
	// set by a2a-go from the selected interface, after the interceptor's Before
	card := *p.card
	iface := *card.SupportedInterfaces[0]
	iface.Tenant = "acme"
	card.SupportedInterfaces = []*a2a.AgentInterface{&iface}
	h = newHarness()
	c2, err := a2aclient.NewFromCard(t.Context(), &card, a2aclient.WithCallInterceptors(h.interceptor()))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c2.GetTask(t.Context(), &a2a.GetTaskRequest{ID: "x"})
	if got := attrs(h.only(t))["a2a.tenant"].AsString(); got != "acme" {
		t.Errorf("a2a.tenant %q from the interface", got)
	}
}

// A caller that leaves a stream before its last state: the span ends when its context does,
// with the task and the last state it saw.
func TestStreamLeftEarly(t *testing.T) {
	p := startPeer(t)
	h := newHarness()
	c := h.client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithCancel(t.Context())
	var taskID a2a.TaskID
	for event, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: userMessage("echo")}) {
		if err != nil {
			t.Fatal(err)
		}
		taskID = event.TaskInfo().TaskID
		break
	}
	if n := len(h.spans.Ended()); n != 0 {
		t.Fatalf("%d spans ended before the context", n)
	}
	cancel()
	s := <-h.ended
	events := s.Events()
	last := events[len(events)-1]
	if last.Name != "otel_a2a.stream.abnormal_end" {
		t.Fatalf("last event %q", last.Name)
	}
	want := map[string]string{"a2a.task.id": string(taskID), "a2a.task.state": "TASK_STATE_SUBMITTED"}
	if got := eventAttrs(last); !maps(got, want) {
		t.Errorf("abnormal_end %v, want %v", got, want)
	}
	if s.Status().Code != codes.Unset {
		t.Errorf("status %v", s.Status())
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// panicky is a TracerProvider whose tracers fail: the call must go on, the failure counted.
type panicky struct{ embedded.TracerProvider }

func (panicky) Tracer(string, ...trace.TracerOption) trace.Tracer { return panickyTracer{} }

type panickyTracer struct{ embedded.Tracer }

func (panickyTracer) Start(context.Context, string, ...trace.SpanStartOption) (context.Context, trace.Span) {
	panic(errors.New("broken tracer"))
}

func TestFailuresNeverReachTheCaller(t *testing.T) {
	p := startPeer(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	c, err := a2aclient.NewFromCard(t.Context(), p.card, a2aclient.WithCallInterceptors(
		NewInterceptor(WithTracerProvider(panicky{}), WithMeterProvider(mp))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage("echo")}); err != nil {
		t.Fatalf("the call failed: %v", err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "otel_a2a.instrumentation.errors" {
				continue
			}
			sum := m.Data.(metricdata.Sum[int64])
			if len(sum.DataPoints) == 1 && sum.DataPoints[0].Value == 1 {
				kind, _ := sum.DataPoints[0].Attributes.Value("error.type")
				if kind.AsString() != "*errors.errorString" {
					t.Errorf("error.type %q", kind.AsString())
				}
				return
			}
			t.Fatalf("counted %+v", sum.DataPoints)
		}
	}
	t.Fatal("the failure was not counted")
}

// A span that is not sampled costs no state, and the context still propagates.
func TestNotRecording(t *testing.T) {
	p := startPeer(t)
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	c, err := a2aclient.NewFromCard(t.Context(), p.card, a2aclient.WithCallInterceptors(
		NewInterceptor(WithTracerProvider(unsampled), WithPropagators(propagation.TraceContext{}))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage("echo")}); err != nil {
		t.Fatal(err)
	}
	if tp := p.lastTraceparent(); !strings.HasSuffix(tp, "-00") {
		t.Errorf("traceparent at the peer %q, want an unsampled one", tp)
	}
	i := NewInterceptor(WithTracerProvider(unsampled))
	ctx, _, _ := i.Before(t.Context(), &a2aclient.Request{Method: "GetTask", Payload: &a2a.GetTaskRequest{ID: "t"}})
	if _, ok := ctx.Value(callKey{}).(*call); ok {
		t.Error("call state kept for a span that records nothing")
	}
}
