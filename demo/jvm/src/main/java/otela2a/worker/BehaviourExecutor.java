package otela2a.worker;

import io.a2a.server.agentexecution.AgentExecutor;
import io.a2a.server.agentexecution.RequestContext;
import io.a2a.server.tasks.AgentEmitter;
import io.a2a.spec.Message;
import io.a2a.spec.Part;
import io.a2a.spec.TaskState;
import io.a2a.spec.TaskStatus;
import io.a2a.spec.TextPart;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * The test peers' behaviour (tests/peers/python_peer.py, demo/node/echo_peer.mjs), chosen by
 * the first word of the message text: {@code echo} (and anything else) submitted, working,
 * artifact, completed; {@code slow} submitted, working, then waits (at most the slow timeout)
 * for a follow-up or a cancel, and fails on timeout; {@code input} submitted, working,
 * input-required; {@code fail} submitted, working, failed; {@code reject} submitted, rejected.
 *
 * <p>The Java SDK runs a follow-up's execution beside the waiting one (a2a-sdk runs them one
 * after the other): the follow-up releases the waiting {@code slow} execution, which returns
 * with the task still working, and then runs as a fresh text on the same task.
 */
final class BehaviourExecutor implements AgentExecutor {
    private final double slowTimeoutSeconds;
    private final Map<String, CountDownLatch> waiting = new ConcurrentHashMap<>();

    BehaviourExecutor(double slowTimeoutSeconds) {
        this.slowTimeoutSeconds = slowTimeoutSeconds;
    }

    private static Message agentText(AgentEmitter emitter, String text) {
        return emitter.newAgentMessage(List.<Part<?>>of(new TextPart(text)), null);
    }

    private void release(String taskId) {
        CountDownLatch latch = waiting.remove(taskId);
        if (latch != null) {
            latch.countDown();
        }
    }

    @Override
    public void execute(RequestContext context, AgentEmitter emitter) {
        String taskId = context.getTaskId();
        release(taskId);
        if (context.getTask() == null) {
            List<Message> history = context.getMessage() == null ? List.of() : List.of(context.getMessage());
            emitter.addTask(emitter.taskBuilder()
                    .status(new TaskStatus(TaskState.TASK_STATE_SUBMITTED))
                    .history(history)
                    .build());
        }
        String text = context.getUserInput(" ").strip();
        String[] words = text.split("\\s+", 2);
        String word = text.isEmpty() ? "" : words[0].toLowerCase();
        if (word.equals("reject")) {
            emitter.reject(agentText(emitter, "rejected: " + text));
            return;
        }
        emitter.startWork();
        switch (word) {
            case "fail" -> emitter.fail(agentText(emitter, "failed as asked"));
            case "input" -> emitter.requiresInput(agentText(emitter, "more input needed"));
            case "slow" -> {
                CountDownLatch latch = new CountDownLatch(1);
                waiting.put(taskId, latch);
                try {
                    if (!latch.await((long) (slowTimeoutSeconds * 1000), TimeUnit.MILLISECONDS)) {
                        waiting.remove(taskId, latch);
                        emitter.fail(agentText(emitter, "slow task timed out"));
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            default -> {
                String reply = word.equals("echo") && words.length == 2 ? words[1] : text;
                emitter.addArtifact(List.<Part<?>>of(new TextPart("echo: " + reply)), UUID.randomUUID().toString(), "echo", null);
                emitter.complete();
            }
        }
    }

    @Override
    public void cancel(RequestContext context, AgentEmitter emitter) {
        release(context.getTaskId());
        emitter.cancel();
    }
}
