package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"iter"
	"log"
	"net/http"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// hopByHop are the request headers a forwarder must not pass on (RFC 9110 §7.6.1), plus the
// ones the upstream transport sets itself.
var hopByHop = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-authenticate": true,
	"proxy-authorization": true, "te": true, "trailer": true, "transfer-encoding": true,
	"upgrade": true, "host": true, "content-length": true, "accept-encoding": true,
	"content-encoding": true, "content-type": true, "accept": true,
}

// forwarder is an a2asrv.RequestHandler that answers each call with the worker's answer to
// the same call, made through an a2a-go client of the same binding, whose calls otela2a's
// interceptor records as spans. It keeps no task state of its own: what the orchestrator sees
// is what the worker said, re-spelled only when --respell asks for it.
type forwarder struct {
	name     string // "JSON-RPC" or "HTTP+JSON", in the log
	upstream *a2aclient.Client
	respell  speller
}

var _ a2asrv.RequestHandler = (*forwarder)(nil)

// params are the caller's headers (A2A-Version, A2A-Extensions, traceparent, ...) or gRPC
// metadata, passed on; a gRPC caller's transport entries (the :authority pseudo-header,
// grpc-*) are not HTTP headers and stay behind.
func params(ctx context.Context) a2aclient.ServiceParams {
	out := a2aclient.ServiceParams{}
	call, ok := a2asrv.CallContextFrom(ctx)
	if !ok {
		return out
	}
	for k, v := range call.ServiceParams().List() {
		key := strings.ToLower(k)
		if !hopByHop[key] && !strings.HasPrefix(key, ":") && !strings.HasPrefix(key, "grpc-") {
			out[k] = v
		}
	}
	return out
}

// outgoing is the context of the call on the worker: the caller's parameters (less
// A2A-Version, which a2a-go's client sets from the interface it calls) and, when tracing is
// set up (telemetry.go), the caller's trace context as the parent of the gateway's span.
func outgoing(ctx context.Context) context.Context {
	p := params(ctx)
	headers := http.Header{}
	for k, values := range p {
		if strings.EqualFold(k, a2a.SvcParamVersion) {
			delete(p, k)
			continue
		}
		for _, v := range values {
			headers.Add(k, v)
		}
	}
	ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(headers))
	return a2aclient.AttachServiceParams(ctx, p)
}

func (f *forwarder) logf(format string, args ...any) {
	logf(f.name+" "+format, args...)
}

// logf writes one "[gateway] ..." line on stderr, like the Python gateway.
func logf(format string, args ...any) {
	log.Printf("[gateway] "+format, args...)
}

func (f *forwarder) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	task, err := f.upstream.GetTask(outgoing(ctx), req)
	f.respell.task(task)
	return task, err
}

func (f *forwarder) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	resp, err := f.upstream.ListTasks(outgoing(ctx), req)
	if resp != nil {
		for _, t := range resp.Tasks {
			f.respell.task(t)
		}
	}
	return resp, err
}

func (f *forwarder) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	task, err := f.upstream.CancelTask(outgoing(ctx), req)
	f.respell.task(task)
	return task, err
}

func (f *forwarder) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	res, err := f.upstream.SendMessage(outgoing(ctx), req)
	if task, ok := res.(*a2a.Task); ok {
		f.respell.task(task)
	}
	return res, err
}

// stream passes each upstream event on as soon as it arrives (the a2asrv transport writes and
// flushes one SSE frame per event); an upstream break ends the client's stream with its error.
func (f *forwarder) stream(what string, events iter.Seq2[a2a.Event, error]) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		f.logf("%s: stream opened", what)
		for event, err := range events {
			if err != nil {
				f.logf("%s: upstream stream broke (%v); ending it", what, err)
				yield(nil, err)
				return
			}
			f.respell.event(event)
			if !yield(event, nil) {
				f.logf("%s: client left", what)
				return
			}
		}
		f.logf("%s: stream ended", what)
	}
}

func (f *forwarder) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return f.stream("SendStreamingMessage", f.upstream.SendStreamingMessage(outgoing(ctx), req))
}

func (f *forwarder) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return f.stream("SubscribeToTask", f.upstream.SubscribeToTask(outgoing(ctx), req))
}

func (f *forwarder) GetTaskPushConfig(ctx context.Context, req *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return f.upstream.GetTaskPushConfig(outgoing(ctx), req)
}

func (f *forwarder) ListTaskPushConfigs(ctx context.Context, req *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	configs, err := f.upstream.ListTaskPushConfigs(outgoing(ctx), req)
	if err != nil {
		return nil, err
	}
	return &a2a.ListTaskPushConfigResponse{Configs: configs}, nil
}

func (f *forwarder) CreateTaskPushConfig(ctx context.Context, req *a2a.PushConfig) (*a2a.PushConfig, error) {
	return f.upstream.CreateTaskPushConfig(outgoing(ctx), req)
}

func (f *forwarder) DeleteTaskPushConfig(ctx context.Context, req *a2a.DeleteTaskPushConfigRequest) error {
	return f.upstream.DeleteTaskPushConfig(outgoing(ctx), req)
}

func (f *forwarder) GetExtendedAgentCard(ctx context.Context, req *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return f.upstream.GetExtendedAgentCard(outgoing(ctx), req)
}

// errorBodyFix makes the worker's HTTP+JSON error bodies readable by a2a-go's HTTP+JSON client
// (2.3.1), which reads only a google.rpc.Status body (`{"error": {"code", "status", "message",
// "details": [ErrorInfo]}}`) under `application/json` and turns anything else into a bare 500
// or 400, so that a TaskNotFound would reach the orchestrator as another error (the `forget`
// variant):
//   - @a2a-js/sdk labels its error bodies `application/a2a+json`: relabelled `application/json`;
//   - the A2A Java SDK before 1.0.0.Final answers `{"error": "io.a2a.spec.TaskNotFoundError",
//     "message": ...}`: rewritten as the Status body whose ErrorInfo reason the class names.
type errorBodyFix struct{ next http.RoundTripper }

// javaReasons: the A2A error reason each a2a-java error class stands for.
var javaReasons = map[string]string{
	"JSONParseError": "PARSE_ERROR", "InvalidRequestError": "INVALID_REQUEST",
	"MethodNotFoundError": "METHOD_NOT_FOUND", "InvalidParamsError": "INVALID_PARAMS",
	"InternalError": "INTERNAL_ERROR", "TaskNotFoundError": "TASK_NOT_FOUND",
	"TaskNotCancelableError":              "TASK_NOT_CANCELABLE",
	"PushNotificationNotSupportedError":   "PUSH_NOTIFICATION_NOT_SUPPORTED",
	"UnsupportedOperationError":           "UNSUPPORTED_OPERATION",
	"ContentTypeNotSupportedError":        "CONTENT_TYPE_NOT_SUPPORTED",
	"InvalidAgentResponseError":           "INVALID_AGENT_RESPONSE",
	"ExtendedAgentCardNotConfiguredError": "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
	"ExtensionSupportRequiredError":       "EXTENSION_SUPPORT_REQUIRED",
	"VersionNotSupportedError":            "VERSION_NOT_SUPPORTED",
}

// rpcStatus: the google.rpc code name of an HTTP status, as AIP-193 maps them.
var rpcStatus = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	409: "FAILED_PRECONDITION", 415: "INVALID_ARGUMENT", 500: "INTERNAL", 501: "UNIMPLEMENTED",
	503: "UNAVAILABLE",
}

const maxErrorBody = 64 << 10 // an error body larger than this is passed on as it came

func (m errorBodyFix) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := m.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/a2a+json") {
		resp.Header.Set("Content-Type", "application/json"+strings.TrimPrefix(ct, "application/a2a+json"))
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return resp, nil
	}
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	resp.Body.Close()
	if readErr == nil && len(body) <= maxErrorBody {
		if status, ok := javaStatus(resp.StatusCode, body); ok {
			body = status
			resp.ContentLength = int64(len(body))
			resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// javaStatus: the google.rpc.Status body for an a2a-java class-named error body, if it is one.
func javaStatus(code int, body []byte) ([]byte, bool) {
	var java struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &java) != nil {
		return nil, false
	}
	class := java.Error[strings.LastIndex(java.Error, ".")+1:]
	reason, ok := javaReasons[class]
	if !ok || !(strings.HasPrefix(java.Error, "io.a2a.spec.") || strings.HasPrefix(java.Error, "org.a2aproject.sdk.spec.")) {
		return nil, false
	}
	out, err := json.Marshal(map[string]any{"error": map[string]any{
		"code": code, "status": rpcStatus[code], "message": java.Message,
		"details": []map[string]any{{
			"@type":  "type.googleapis.com/google.rpc.ErrorInfo",
			"domain": a2a.ProtocolDomain, "reason": reason,
		}},
	}})
	return out, err == nil
}
