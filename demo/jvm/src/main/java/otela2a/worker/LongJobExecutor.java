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
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Every new message starts a "long job" task: SUBMITTED, WORKING, then a WORKING status update
 * every heartbeat/2 s (a healthy stream keeps frames flowing), COMPLETED with an artifact after
 * the job's seconds (a number in the message text, "job 12", overrides the default), or
 * CANCELED on CancelTask. A follow-up message to a running job is acknowledged with a WORKING
 * status update that carries a short agent message; the job goes on.
 *
 * <p>The SDK runs {@link #execute} on a thread of its own and lets the job's stream end when it
 * returns, so the job blocks in it until done or canceled.
 */
final class LongJobExecutor implements AgentExecutor {
    private static final Pattern NUMBER = Pattern.compile("(\\d+(?:\\.\\d+)?)");

    private final double heartbeatSeconds;
    private final double jobSeconds;
    private final Map<String, CountDownLatch> jobs = new ConcurrentHashMap<>();

    LongJobExecutor(double heartbeatSeconds, double jobSeconds) {
        this.heartbeatSeconds = heartbeatSeconds;
        this.jobSeconds = jobSeconds;
    }

    private static List<Part<?>> text(String text) {
        return List.of(new TextPart(text));
    }

    @Override
    public void execute(RequestContext context, AgentEmitter emitter) {
        String taskId = context.getTaskId();
        String text = context.getUserInput(" ");
        if (jobs.containsKey(taskId)) {
            String noted = text.length() > 80 ? text.substring(0, 80) : text;
            emitter.updateStatus(TaskState.TASK_STATE_WORKING, emitter.newAgentMessage(text("noted: " + noted), null));
            Worker.log("follow-up on " + taskId);
            return;
        }
        if (context.getTask() == null) {
            // A Task first, as the Python and JS SDKs' streams begin: the SDK's submit() would
            // open the stream with a status update, which a client that learns the task id
            // from the first Task never sees.
            List<Message> history = context.getMessage() == null ? List.of() : List.of(context.getMessage());
            emitter.addTask(emitter.taskBuilder()
                    .status(new TaskStatus(TaskState.TASK_STATE_SUBMITTED))
                    .history(history)
                    .build());
        }
        Matcher m = NUMBER.matcher(text);
        double asked = m.find() ? Double.parseDouble(m.group(1)) : 0;
        double seconds = asked > 0 ? asked : jobSeconds;
        CountDownLatch cancelled = new CountDownLatch(1);
        jobs.put(taskId, cancelled);
        Worker.log("job " + taskId + " started (" + seconds + " s)");
        try {
            emitter.startWork();
            long tickNanos = (long) Math.max(50e6, heartbeatSeconds * 1e9 / 2);
            long deadline = System.nanoTime() + (long) (seconds * 1e9);
            while (true) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                if (cancelled.await(Math.min(left, tickNanos), TimeUnit.NANOSECONDS)) {
                    Worker.log("job " + taskId + " canceled");
                    return;
                }
                if (deadline - System.nanoTime() > 0) {
                    emitter.startWork();
                }
            }
            emitter.addArtifact(text("long job done after " + seconds + " s"), UUID.randomUUID().toString(), "result", null);
            emitter.complete();
            Worker.log("job " + taskId + " completed");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            jobs.remove(taskId);
        }
    }

    @Override
    public void cancel(RequestContext context, AgentEmitter emitter) {
        emitter.cancel(emitter.newAgentMessage(text("canceled on request"), null));
        CountDownLatch job = jobs.remove(context.getTaskId());
        if (job != null) {
            job.countDown();
        }
    }
}
