package otela2a.worker;

import io.a2a.jsonrpc.common.wrappers.ListTasksResult;
import io.a2a.server.ServerCallContext;
import io.a2a.server.requesthandlers.RequestHandler;
import io.a2a.spec.A2AError;
import io.a2a.spec.A2AMethods;
import io.a2a.spec.DeleteTaskPushNotificationConfigParams;
import io.a2a.spec.EventKind;
import io.a2a.spec.GetTaskPushNotificationConfigParams;
import io.a2a.spec.ListTaskPushNotificationConfigParams;
import io.a2a.spec.ListTaskPushNotificationConfigResult;
import io.a2a.spec.ListTasksParams;
import io.a2a.spec.Message;
import io.a2a.spec.MessageSendParams;
import io.a2a.spec.StreamingEventKind;
import io.a2a.spec.Task;
import io.a2a.spec.TaskIdParams;
import io.a2a.spec.TaskPushNotificationConfig;
import io.a2a.spec.TaskQueryParams;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.sdk.autoconfigure.AutoConfiguredOpenTelemetrySdk;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The worker's own spans, as the A2A Java SDK's OpenTelemetry server extra would make them
 * (a2a-java-sdk-opentelemetry-server, not served here: docs/runtimes.md): a decorator of the
 * request handler with one SERVER span per A2A method, named after it, carrying the extra's
 * {@code gen_ai.agent.a2a.*} attributes. One addition: {@code gen_ai.agent.a2a.status} (the
 * extra's own name, which its server spans leave unset) is the state of the task the reply
 * carried, spelt as on the wire ({@code TASK_STATE_WORKING}), so that the worker's belief about a
 * task is on its own spans. No message content is recorded.
 *
 * <p>Exported over OTLP only when {@code OTEL_EXPORTER_OTLP_ENDPOINT} or
 * {@code OTEL_EXPORTER_OTLP_TRACES_ENDPOINT} is set (the SDK's autoconfiguration reads the
 * rest of the OTEL_* environment); service name {@code a2a-jvm-worker} unless
 * {@code OTEL_SERVICE_NAME} says otherwise; traces only.
 */
final class Telemetry implements RequestHandler {
    static final String PREFIX = "gen_ai.agent.a2a";
    static final String OPERATION_NAME = PREFIX + ".operation.name";
    static final String TASK_ID = PREFIX + ".task_id";
    static final String CONTEXT_ID = PREFIX + ".context_id";
    static final String MESSAGE_ID = PREFIX + ".message_id";
    static final String ROLE = PREFIX + ".role";
    static final String PARTS_NUMBER = PREFIX + ".parts.number";
    static final String STATUS = PREFIX + ".status";
    static final String ERROR_TYPE = "error.type";

    private final RequestHandler delegate;
    private final Tracer tracer;

    private Telemetry(RequestHandler delegate, Tracer tracer) {
        this.delegate = delegate;
        this.tracer = tracer;
    }

    /** The OpenTelemetry SDK when an OTLP endpoint is configured, else none. */
    static OpenTelemetry openTelemetry(Map<String, String> env) {
        if (!env.containsKey("OTEL_EXPORTER_OTLP_ENDPOINT") && !env.containsKey("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
            return OpenTelemetry.noop();
        }
        return AutoConfiguredOpenTelemetrySdk.builder()
                .addPropertiesSupplier(() -> Map.of(
                        "otel.service.name", env.getOrDefault("OTEL_SERVICE_NAME", "a2a-jvm-worker"),
                        "otel.metrics.exporter", "none",
                        "otel.logs.exporter", "none",
                        "otel.bsp.schedule.delay", "200"))
                .build()
                .getOpenTelemetrySdk();
    }

    static RequestHandler wrap(RequestHandler delegate, OpenTelemetry otel) {
        return new Telemetry(delegate, otel.getTracer("otel-a2a-demo-jvm-worker"));
    }

    /** One span on the current thread: started, given the reply's state, ended. */
    private <T> T traced(String method, String taskId, Message message, Supplier<T> call) {
        var builder = tracer.spanBuilder(method).setSpanKind(SpanKind.SERVER).setAttribute(OPERATION_NAME, method);
        if (taskId != null) {
            builder.setAttribute(TASK_ID, taskId);
        }
        if (message != null) {
            if (message.taskId() != null) {
                builder.setAttribute(TASK_ID, message.taskId());
            }
            if (message.contextId() != null) {
                builder.setAttribute(CONTEXT_ID, message.contextId());
            }
            builder.setAttribute(MESSAGE_ID, message.messageId());
            builder.setAttribute(ROLE, message.role().name());
            builder.setAttribute(PARTS_NUMBER, message.parts().size());
        }
        Span span = builder.startSpan();
        try (var scope = span.makeCurrent()) {
            T result = call.get();
            if (result instanceof Task task) {
                span.setAttribute(TASK_ID, task.id());
                span.setAttribute(CONTEXT_ID, task.contextId());
                span.setAttribute(STATUS, task.status().state().name());
            }
            span.setStatus(StatusCode.OK);
            return result;
        } catch (A2AError error) {
            span.setAttribute(ERROR_TYPE, error.getClass().getSimpleName());
            span.setStatus(StatusCode.ERROR, error.getMessage());
            throw error;
        } finally {
            span.end();
        }
    }

    @Override
    public Task onGetTask(TaskQueryParams params, ServerCallContext context) throws A2AError {
        return traced(A2AMethods.GET_TASK_METHOD, params.id(), null, () -> delegate.onGetTask(params, context));
    }

    @Override
    public ListTasksResult onListTasks(ListTasksParams params, ServerCallContext context) throws A2AError {
        return traced(A2AMethods.LIST_TASK_METHOD, null, null, () -> delegate.onListTasks(params, context));
    }

    @Override
    public Task onCancelTask(TaskIdParams params, ServerCallContext context) throws A2AError {
        return traced(A2AMethods.CANCEL_TASK_METHOD, params.id(), null, () -> delegate.onCancelTask(params, context));
    }

    @Override
    public EventKind onMessageSend(MessageSendParams params, ServerCallContext context) throws A2AError {
        return traced(A2AMethods.SEND_MESSAGE_METHOD, null, params.message(), () -> delegate.onMessageSend(params, context));
    }

    /** As the extra: the span covers the creation of the stream, not the stream. */
    @Override
    public java.util.concurrent.Flow.Publisher<StreamingEventKind> onMessageSendStream(MessageSendParams params, ServerCallContext context) throws A2AError {
        return traced(A2AMethods.SEND_STREAMING_MESSAGE_METHOD, null, params.message(),
                () -> delegate.onMessageSendStream(params, context));
    }

    @Override
    public java.util.concurrent.Flow.Publisher<StreamingEventKind> onSubscribeToTask(TaskIdParams params, ServerCallContext context) throws A2AError {
        return traced(A2AMethods.SUBSCRIBE_TO_TASK_METHOD, params.id(), null, () -> delegate.onSubscribeToTask(params, context));
    }

    @Override
    public TaskPushNotificationConfig onCreateTaskPushNotificationConfig(TaskPushNotificationConfig params, ServerCallContext context) throws A2AError {
        return traced(A2AMethods.SET_TASK_PUSH_NOTIFICATION_CONFIG_METHOD, params.taskId(), null,
                () -> delegate.onCreateTaskPushNotificationConfig(params, context));
    }

    @Override
    public TaskPushNotificationConfig onGetTaskPushNotificationConfig(GetTaskPushNotificationConfigParams params, ServerCallContext context) throws A2AError {
        return traced(A2AMethods.GET_TASK_PUSH_NOTIFICATION_CONFIG_METHOD, params.taskId(), null,
                () -> delegate.onGetTaskPushNotificationConfig(params, context));
    }

    @Override
    public ListTaskPushNotificationConfigResult onListTaskPushNotificationConfig(ListTaskPushNotificationConfigParams params, ServerCallContext context) throws A2AError {
        return traced(A2AMethods.LIST_TASK_PUSH_NOTIFICATION_CONFIG_METHOD, params.id(), null,
                () -> delegate.onListTaskPushNotificationConfig(params, context));
    }

    @Override
    public void onDeleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigParams params, ServerCallContext context) throws A2AError {
        traced(A2AMethods.DELETE_TASK_PUSH_NOTIFICATION_CONFIG_METHOD, params.taskId(), null, () -> {
            delegate.onDeleteTaskPushNotificationConfig(params, context);
            return null;
        });
    }
}
