package otela2a

import (
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// call is one A2A call under observation: its span and what is known of its task. A stream's
// events come one at a time, but its span may also be ended from the caller's context
// (context.AfterFunc), hence the lock.
type call struct {
	mu      sync.Mutex
	span    trace.Span
	stream  bool
	binding a2a.TransportProtocol
	// payload is the request, read again at the first reply: a2a-go's client sets the tenant
	// on it after the interceptors ran. It is only read, never changed.
	payload      any
	replied      bool
	tenant       bool // a2a.tenant recorded
	conversation bool // gen_ai.conversation.id recorded
	taskID       string
	state        string // the last state recorded for taskID
	raw          bool   // otel_a2a.task.state.raw recorded: it then follows every state
	ended        bool
	stop         func() bool // releases the context.AfterFunc of a stream
}

func valid(s string) bool { return s != "" && len(s) <= maxValueLen }

// request adds what the request says: its task, message, context and tenant.
func (c *call) request(attrs []attribute.KeyValue) []attribute.KeyValue {
	taskID, tenant := "", requestTenant(c.payload)
	switch p := c.payload.(type) {
	case *a2a.SendMessageRequest:
		if p != nil && p.Message != nil {
			m := p.Message
			taskID = string(m.TaskID)
			if valid(m.ID) {
				attrs = append(attrs, attribute.String(attrMessageID, m.ID))
			}
			if valid(m.ContextID) {
				attrs = append(attrs, attribute.String(attrConversationID, m.ContextID))
				c.conversation = true
			}
			if refs := referenceTasks(m.ReferenceTasks); len(refs) > 0 {
				attrs = append(attrs, attribute.StringSlice(attrReferenceTasks, refs))
			}
		}
	case *a2a.GetTaskRequest:
		if p != nil {
			taskID = string(p.ID)
		}
	case *a2a.CancelTaskRequest:
		if p != nil {
			taskID = string(p.ID)
		}
	case *a2a.SubscribeToTaskRequest:
		if p != nil {
			taskID = string(p.ID)
		}
	case *a2a.ListTasksRequest:
		if p != nil && valid(p.ContextID) {
			attrs = append(attrs, attribute.String(attrConversationID, p.ContextID))
			c.conversation = true
		}
	case *a2a.GetTaskPushConfigRequest:
		if p != nil {
			taskID = string(p.TaskID)
		}
	case *a2a.ListTaskPushConfigRequest:
		if p != nil {
			taskID = string(p.TaskID)
		}
	case *a2a.DeleteTaskPushConfigRequest:
		if p != nil {
			taskID = string(p.TaskID)
		}
	case *a2a.PushConfig:
		if p != nil {
			taskID = string(p.TaskID)
		}
	}
	if valid(taskID) {
		c.taskID = taskID
		attrs = append(attrs, attribute.String(attrTaskID, taskID))
	}
	if valid(tenant) {
		c.tenant = true
		attrs = append(attrs, attribute.String(attrTenant, tenant))
	}
	return attrs
}

func requestTenant(payload any) string {
	switch p := payload.(type) {
	case *a2a.SendMessageRequest:
		if p != nil {
			return p.Tenant
		}
	case *a2a.GetTaskRequest:
		if p != nil {
			return p.Tenant
		}
	case *a2a.CancelTaskRequest:
		if p != nil {
			return p.Tenant
		}
	case *a2a.SubscribeToTaskRequest:
		if p != nil {
			return p.Tenant
		}
	case *a2a.ListTasksRequest:
		if p != nil {
			return p.Tenant
		}
	case *a2a.GetTaskPushConfigRequest:
		if p != nil {
			return p.Tenant
		}
	case *a2a.ListTaskPushConfigRequest:
		if p != nil {
			return p.Tenant
		}
	case *a2a.DeleteTaskPushConfigRequest:
		if p != nil {
			return p.Tenant
		}
	case *a2a.PushConfig:
		if p != nil {
			return p.Tenant
		}
	case *a2a.GetExtendedAgentCardRequest:
		if p != nil {
			return p.Tenant
		}
	}
	return ""
}

func referenceTasks(ids []a2a.TaskID) []string {
	var out []string
	for _, id := range ids {
		if len(out) == maxReferenceTasks {
			break
		}
		if valid(string(id)) {
			out = append(out, string(id))
		}
	}
	return out
}

// reply records one reply, stream event or error; the span ends with a unary call's reply,
// a stream's error, or its event after which the server closes the stream.
func (c *call) reply(resp *a2aclient.Response) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	if !c.replied {
		c.replied = true
		if tenant := requestTenant(c.payload); !c.tenant && valid(tenant) {
			c.tenant = true
			c.span.SetAttributes(attribute.String(attrTenant, tenant))
		}
		c.payload = nil
	}
	if resp.Err != nil {
		kind := errorType(resp.Err, c.binding)
		c.span.SetAttributes(attribute.String(attrErrorType, kind))
		c.span.SetStatus(codes.Error, kind)
		c.end()
		return
	}
	last := false
	switch p := resp.Payload.(type) {
	case *a2a.Task:
		if p != nil {
			last = c.observe(p.ID, p.ContextID, p.Status.State)
		}
	case *a2a.TaskStatusUpdateEvent:
		if p != nil {
			last = c.observe(p.TaskID, p.ContextID, p.Status.State)
		}
	case *a2a.TaskArtifactUpdateEvent:
		if p != nil {
			c.observe(p.TaskID, p.ContextID, a2a.TaskStateUnspecified)
		}
	case *a2a.Message:
		if p != nil {
			c.observe(p.TaskID, p.ContextID, a2a.TaskStateUnspecified)
			last = true // a message is the whole answer
		}
	}
	if !c.stream || last {
		c.end()
	}
}

// observe records a task, context and state a reply carries; it says whether the state is one
// after which a server closes a stream. The span's a2a.task.id is the task the request named,
// else the first one a reply named; a2a.task.state is that task's last state. On a stream,
// every state is also an otel_a2a.task.status event naming its own task.
func (c *call) observe(taskID a2a.TaskID, contextID string, state a2a.TaskState) bool {
	id := string(taskID)
	if !valid(id) {
		id = ""
	}
	if c.taskID == "" && id != "" {
		c.taskID = id
		c.span.SetAttributes(attribute.String(attrTaskID, id))
	}
	if !c.conversation && valid(contextID) {
		c.conversation = true
		c.span.SetAttributes(attribute.String(attrConversationID, contextID))
	}
	value, raw, ok := stateValue(state)
	if !ok {
		return false
	}
	if c.stream {
		attrs := []attribute.KeyValue{attribute.String(attrTaskState, value)}
		if id != "" {
			attrs = append(attrs, attribute.String(attrTaskID, id))
		}
		if raw != "" {
			attrs = append(attrs, attribute.String(attrTaskStateRaw, raw))
		}
		c.span.AddEvent(eventTaskStatus, trace.WithAttributes(attrs...))
	}
	if id == "" || id == c.taskID {
		c.state = value
		c.span.SetAttributes(attribute.String(attrTaskState, value))
		switch {
		case raw != "":
			c.raw = true
			c.span.SetAttributes(attribute.String(attrTaskStateRaw, raw))
		case c.raw: // an earlier state was spelled otherwise: the attribute follows the wire
			c.span.SetAttributes(attribute.String(attrTaskStateRaw, string(state)))
		}
	}
	return final(value)
}

// abandoned ends a stream's span when the caller's context is done before the stream said
// its last state: an otel_a2a.stream.abnormal_end event names the task and its last state.
func (c *call) abandoned() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	var attrs []attribute.KeyValue
	if c.taskID != "" {
		attrs = append(attrs, attribute.String(attrTaskID, c.taskID))
	}
	if c.state != "" {
		attrs = append(attrs, attribute.String(attrTaskState, c.state))
	}
	c.span.AddEvent(eventStreamAbnormalEnd, trace.WithAttributes(attrs...))
	c.end()
}

func (c *call) end() {
	c.ended = true
	if c.stop != nil {
		c.stop()
	}
	c.span.End()
}
