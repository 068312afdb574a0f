package otela2a

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// jsonrpcCodes are the A2A errors' JSON-RPC codes (A2A specification, error code mappings).
// a2a-go's clients turn an error reply into its a2a sentinel error and keep no wire code, so
// the code is found again from the sentinel; a code a2a-go does not know reaches the caller
// as an internal error, -32603.
var jsonrpcCodes = []struct {
	err  error
	code int
}{
	{a2a.ErrTaskNotFound, -32001},
	{a2a.ErrTaskNotCancelable, -32002},
	{a2a.ErrPushNotificationNotSupported, -32003},
	{a2a.ErrUnsupportedOperation, -32004},
	{a2a.ErrUnsupportedContentType, -32005},
	{a2a.ErrInvalidAgentResponse, -32006},
	{a2a.ErrExtendedCardNotConfigured, -32007},
	{a2a.ErrExtensionSupportRequired, -32008},
	{a2a.ErrVersionNotSupported, -32009},
	{a2a.ErrUnauthenticated, -31401},
	{a2a.ErrUnauthorized, -31403},
	{a2a.ErrParseError, -32700},
	{a2a.ErrInvalidRequest, -32600},
	{a2a.ErrMethodNotFound, -32601},
	{a2a.ErrInvalidParams, -32602},
	{a2a.ErrServerError, -32000},
	{a2a.ErrInternalError, -32603},
}

// a2a-go's JSON-RPC client answers a non-200 reply with this error text, and nothing else
// carries the status.
const unexpectedStatus = "unexpected HTTP status: "

// errorType is the convention's error.type of a failed call: "the string representation of
// the JSON-RPC error code or protocol status code, if one is returned, or the canonical name
// of the exception". An A2A error reply is named the way otel-a2a's Python instrumentation
// names it on the same binding: its JSON-RPC code on JSON-RPC ("-32001"), its A2A error
// reason on HTTP+JSON and gRPC ("TASK_NOT_FOUND", the google.rpc.ErrorInfo reason: the HTTP
// status alone says 400 for most A2A errors) and when the binding is not known. A JSON-RPC
// reply that is not 200 is named by its HTTP status; anything else by the Go error's type
// (as OpenTelemetry Go's semconv.ErrorType names it), context.DeadlineExceeded and
// context.Canceled by their names.
func errorType(err error, binding a2a.TransportProtocol) string {
	for _, c := range jsonrpcCodes {
		if errors.Is(err, c.err) {
			if binding == a2a.TransportProtocolJSONRPC {
				return strconv.Itoa(c.code)
			}
			return a2a.ErrorReason(c.err)
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "context.DeadlineExceeded"
	case errors.Is(err, context.Canceled):
		return "context.Canceled"
	}
	if _, rest, ok := strings.Cut(err.Error(), unexpectedStatus); ok {
		if code, _, _ := strings.Cut(rest, " "); len(code) == 3 {
			if _, convErr := strconv.Atoi(code); convErr == nil {
				return code
			}
		}
	}
	if name := semconv.ErrorType(err).Value.AsString(); name != "" && len(name) <= maxValueLen {
		return name
	}
	return errorTypeOther
}
