// Package otela2a records the A2A calls of an a2a-go client (github.com/a2aproject/a2a-go/v2)
// as OpenTelemetry's A2A client spans (semantic-conventions-genai, docs/gen-ai/a2a.md), so
// that otel-a2a's detector can judge a Go service's decisions and observations from its spans.
//
// Enable it with one factory option:
//
//	client, err := a2aclient.NewFromCard(ctx, card,
//		a2aclient.WithCallInterceptors(otela2a.NewInterceptor()))
//
// Each call is a span of kind CLIENT named by its a2a.method.name (SendMessage, GetTask,
// CancelTask, SendStreamingMessage, ...), with a2a.task.id, a2a.task.state (TASK_STATE_*),
// a2a.protocol.version, a2a.message.id, a2a.message.reference_task_ids, a2a.tenant,
// gen_ai.conversation.id, gen_ai.agent.name/version/description (from the card),
// server.address, server.port and, on failure, error.type and an error status. A stream's
// span lasts until its last event and carries one otel_a2a.task.status event per streamed
// state. Spans go to the global TracerProvider unless WithTracerProvider says otherwise.
//
// The interceptor records no message contents and no credentials, and never fails a call.
package otela2a
