package otela2a

// The names this package emits. Those of OpenTelemetry's A2A semantic conventions
// (semantic-conventions-genai, docs/gen-ai/a2a.md and model/a2a/, read at commit
// 6718089fe6e0530fdf498d845f0532e9cf172c81, status Development) are spelled its way; the few
// it does not define are otel-a2a's own, under the otel_a2a. prefix, as the Python package
// names them.
const (
	// ScopeName is the instrumentation scope of the tracer and meter: this package's path.
	ScopeName = "github.com/otel-a2a/otel-a2a/go/otela2a"
	// Version is this instrumentation's version, recorded on its scope.
	Version = "0.1.0"
	// SchemaURL is the OpenTelemetry schema of the semantic conventions the A2A convention
	// builds on: it links error.type and server.* to semantic-conventions v1.44.0.
	SchemaURL = "https://opentelemetry.io/schemas/1.44.0"

	attrMethodName     = "a2a.method.name"
	attrProtocol       = "a2a.protocol.version"
	attrTaskID         = "a2a.task.id"
	attrTaskState      = "a2a.task.state"
	attrTenant         = "a2a.tenant"
	attrMessageID      = "a2a.message.id"
	attrReferenceTasks = "a2a.message.reference_task_ids"
	attrConversationID = "gen_ai.conversation.id"
	attrAgentName      = "gen_ai.agent.name"
	attrAgentVersion   = "gen_ai.agent.version"
	attrAgentDesc      = "gen_ai.agent.description"
	attrServerAddress  = "server.address"
	attrServerPort     = "server.port"
	attrErrorType      = "error.type"

	// otel-a2a's own: the wire spelling of a state that is not the convention's value, one
	// event per streamed state (a stream span's attribute holds only the last), and the end
	// of a stream that stopped before a terminal or interrupted state.
	attrTaskStateRaw       = "otel_a2a.task.state.raw"
	eventTaskStatus        = "otel_a2a.task.status"
	eventStreamAbnormalEnd = "otel_a2a.stream.abnormal_end"

	// metricErrors counts this package's own failures (a recovered panic), by error.type.
	metricErrors = "otel_a2a.instrumentation.errors"

	errorTypeOther = "_OTHER"

	// maxValueLen bounds what a peer's value may cost a span: a longer "id" is not an id
	// (the Python package's MAX_ID_LEN), and is left out.
	maxValueLen = 1024
	// maxReferenceTasks bounds a2a.message.reference_task_ids.
	maxReferenceTasks = 64
)

// methodNames maps a2a-go's client method names to the convention's a2a.method.name values
// (the A2A v1.0 operation names); the others are already spelled the convention's way.
var methodNames = map[string]string{
	"GetTaskPushConfig":    "GetTaskPushNotificationConfig",
	"ListTaskPushConfigs":  "ListTaskPushNotificationConfigs",
	"CreateTaskPushConfig": "CreateTaskPushNotificationConfig",
	"DeleteTaskPushConfig": "DeleteTaskPushNotificationConfig",
}

func methodName(sdk string) string {
	if name, ok := methodNames[sdk]; ok {
		return name
	}
	return sdk
}
