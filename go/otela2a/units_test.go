package otela2a

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

func TestServerAddress(t *testing.T) {
	for _, tc := range []struct {
		url  string
		host string
		port int
	}{
		{"http://127.0.0.1:8080/a2a/jsonrpc", "127.0.0.1", 8080},
		{"https://agent.example.com/a2a", "agent.example.com", 443},
		{"http://agent.example.com", "agent.example.com", 80},
		{"http://[::1]:9/x", "::1", 9},
		{"127.0.0.1:50051", "127.0.0.1", 50051},
		{"dns:///agent.example.com:443", "agent.example.com", 443},
		{"dns://8.8.8.8/agent.example.com:50051", "agent.example.com", 50051},
		{"", "", 0},
	} {
		host, port := serverAddress(tc.url)
		if host != tc.host || port != tc.port {
			t.Errorf("%q: %q %d, want %q %d", tc.url, host, port, tc.host, tc.port)
		}
	}
}

func TestStateValue(t *testing.T) {
	for _, tc := range []struct {
		in         a2a.TaskState
		value, raw string
		ok         bool
	}{
		{a2a.TaskStateWorking, "TASK_STATE_WORKING", "", true},
		{"Working", "TASK_STATE_WORKING", "Working", true},
		{"input-required", "TASK_STATE_INPUT_REQUIRED", "input-required", true},
		{"InputRequired", "TASK_STATE_INPUT_REQUIRED", "InputRequired", true},
		{"cancelled", "TASK_STATE_CANCELED", "cancelled", true},
		{"TASK_STATE_CANCELLED", "TASK_STATE_CANCELED", "TASK_STATE_CANCELLED", true},
		{"unknown", "TASK_STATE_UNSPECIFIED", "unknown", true},
		{"paused", "paused", "", true}, // not a state the convention knows: as it came
		{"", "", "", false},            // no state said
		{a2a.TaskState(strings.Repeat("x", maxValueLen+1)), "", "", false},
	} {
		value, raw, ok := stateValue(tc.in)
		if value != tc.value || raw != tc.raw || ok != tc.ok {
			t.Errorf("%.20q: %q %q %v", tc.in, value, raw, ok)
		}
	}
}

func TestMethodNames(t *testing.T) {
	for sdk, want := range map[string]string{
		"GetTask": "GetTask", "SendStreamingMessage": "SendStreamingMessage",
		"GetTaskPushConfig": "GetTaskPushNotificationConfig", "ListTaskPushConfigs": "ListTaskPushNotificationConfigs",
		"CreateTaskPushConfig": "CreateTaskPushNotificationConfig", "DeleteTaskPushConfig": "DeleteTaskPushNotificationConfig",
		"GetExtendedAgentCard": "GetExtendedAgentCard",
	} {
		if got := methodName(sdk); got != want {
			t.Errorf("%s: %s, want %s", sdk, got, want)
		}
	}
}

func TestErrorTypeOfLocalFailures(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("failed to send HTTP request: %w", context.DeadlineExceeded), "context.DeadlineExceeded"},
		{context.Canceled, "context.Canceled"},
		{fmt.Errorf("unexpected HTTP status: 502 Bad Gateway"), "502"},
		{fmt.Errorf("wrapped: %w", a2a.ErrTaskNotCancelable), "TASK_NOT_CANCELABLE"},
		{errors.New("plain"), "*errors.errorString"},
	} {
		if got := errorType(tc.err, ""); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
	if got := errorType(a2a.ErrTaskNotCancelable, a2a.TransportProtocolJSONRPC); got != "-32002" {
		t.Errorf("JSON-RPC: %q", got)
	}
}
