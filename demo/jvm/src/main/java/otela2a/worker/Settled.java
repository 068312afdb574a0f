package otela2a.worker;

import io.a2a.jsonrpc.common.wrappers.ListTasksResult;
import io.a2a.server.ServerCallContext;
import io.a2a.server.events.CountingMainEventBus;
import io.a2a.server.events.MainEventBusProcessorCallback;
import io.a2a.server.requesthandlers.RequestHandler;
import io.a2a.server.tasks.TaskStore;
import io.a2a.spec.A2AError;
import io.a2a.spec.DeleteTaskPushNotificationConfigParams;
import io.a2a.spec.Event;
import io.a2a.spec.EventKind;
import io.a2a.spec.GetTaskPushNotificationConfigParams;
import io.a2a.spec.ListTaskPushNotificationConfigParams;
import io.a2a.spec.ListTaskPushNotificationConfigResult;
import io.a2a.spec.ListTasksParams;
import io.a2a.spec.MessageSendParams;
import io.a2a.spec.StreamingEventKind;
import io.a2a.spec.Task;
import io.a2a.spec.TaskIdParams;
import io.a2a.spec.TaskPushNotificationConfig;
import io.a2a.spec.TaskQueryParams;
import java.util.concurrent.Flow;

/**
 * A blocking SendMessage answers the task as persisted once every event submitted before the
 * SDK's reply was persisted too.
 *
 * <p>a2a-java 1.0.0.Alpha3's blocking path waits for the agent, then reads the task from the
 * store; its event-bus processor persists on a thread of its own, so under load the reply can
 * carry a state older than the one the agent already reached ({@code working} for a task in
 * {@code input-required}). Here the reply waits (at most {@link #LIMIT_MS}) until the
 * processor has handled every event submitted so far, then reads the store again.
 */
final class Settled implements RequestHandler, MainEventBusProcessorCallback {
    private static final long LIMIT_MS = 5_000;

    private final RequestHandler delegate;
    private final TaskStore store;
    private final CountingMainEventBus bus;
    private final Object lock = new Object();
    private long processed;

    Settled(RequestHandler delegate, TaskStore store, CountingMainEventBus bus) {
        this.delegate = delegate;
        this.store = store;
        this.bus = bus;
    }

    @Override
    public void onEventProcessed(String taskId, Event event) {
        synchronized (lock) {
            processed += 1;
            lock.notifyAll();
        }
    }

    @Override
    public void onTaskFinalized(String taskId) {}

    @Override
    public EventKind onMessageSend(MessageSendParams params, ServerCallContext context) throws A2AError {
        EventKind reply = delegate.onMessageSend(params, context);
        boolean blocking = params.configuration() != null && Boolean.TRUE.equals(params.configuration().blocking());
        if (!blocking || !(reply instanceof Task task)) {
            return reply;
        }
        long target = bus.submitted();
        long deadline = System.currentTimeMillis() + LIMIT_MS;
        synchronized (lock) {
            while (processed < target) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    return reply;
                }
                try {
                    lock.wait(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return reply;
                }
            }
        }
        Task stored = store.get(task.id());
        return stored == null ? reply : stored;
    }

    @Override
    public Task onGetTask(TaskQueryParams params, ServerCallContext context) throws A2AError {
        return delegate.onGetTask(params, context);
    }

    @Override
    public ListTasksResult onListTasks(ListTasksParams params, ServerCallContext context) throws A2AError {
        return delegate.onListTasks(params, context);
    }

    @Override
    public Task onCancelTask(TaskIdParams params, ServerCallContext context) throws A2AError {
        return delegate.onCancelTask(params, context);
    }

    @Override
    public Flow.Publisher<StreamingEventKind> onMessageSendStream(MessageSendParams params, ServerCallContext context) throws A2AError {
        return delegate.onMessageSendStream(params, context);
    }

    @Override
    public TaskPushNotificationConfig onCreateTaskPushNotificationConfig(TaskPushNotificationConfig params, ServerCallContext context) throws A2AError {
        return delegate.onCreateTaskPushNotificationConfig(params, context);
    }

    @Override
    public TaskPushNotificationConfig onGetTaskPushNotificationConfig(GetTaskPushNotificationConfigParams params, ServerCallContext context) throws A2AError {
        return delegate.onGetTaskPushNotificationConfig(params, context);
    }

    @Override
    public Flow.Publisher<StreamingEventKind> onSubscribeToTask(TaskIdParams params, ServerCallContext context) throws A2AError {
        return delegate.onSubscribeToTask(params, context);
    }

    @Override
    public ListTaskPushNotificationConfigResult onListTaskPushNotificationConfig(ListTaskPushNotificationConfigParams params, ServerCallContext context) throws A2AError {
        return delegate.onListTaskPushNotificationConfig(params, context);
    }

    @Override
    public void onDeleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigParams params, ServerCallContext context) throws A2AError {
        delegate.onDeleteTaskPushNotificationConfig(params, context);
    }
}
