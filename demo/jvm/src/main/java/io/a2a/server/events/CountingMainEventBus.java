package io.a2a.server.events;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The SDK's event bus, counting what was submitted to it. In the SDK's package because
 * {@code submit} is package-private; used by the worker to wait until its processor has
 * persisted every event submitted so far (otela2a.worker.Settled).
 */
public final class CountingMainEventBus extends MainEventBus {
    private final AtomicLong submitted = new AtomicLong();

    @Override
    void submit(String taskId, EventQueue.MainQueue mainQueue, EventQueueItem item) {
        submitted.incrementAndGet();
        super.submit(taskId, mainQueue, item);
    }

    public long submitted() {
        return submitted.get();
    }
}
