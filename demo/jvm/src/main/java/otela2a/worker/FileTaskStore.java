package otela2a.worker;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.util.JsonFormat;
import io.a2a.grpc.utils.ProtoUtils;
import io.a2a.server.tasks.InMemoryTaskStore;
import io.a2a.spec.Message;
import io.a2a.spec.Task;
import io.a2a.spec.TaskState;
import io.a2a.spec.TaskStatus;
import io.a2a.spec.TextPart;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.UUID;
import java.util.stream.Stream;

/**
 * The SDK's in-memory store, made durable: one JSON file per task (the v1.0 proto JSON form),
 * written atomically on every save, read back on start.
 *
 * <p>On start every stored task that is not terminal is rehydrated as TASK_STATE_FAILED: an
 * in-flight job cannot survive a restart, and saying so is the precondition the invariant
 * rests on. Saves are serialised so that two saves of one task never interleave.
 */
final class FileTaskStore extends InMemoryTaskStore {
    private final Path dir;

    FileTaskStore(Path dir) {
        this.dir = dir;
        try {
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private Path file(String taskId) {
        return dir.resolve(URLEncoder.encode(taskId, StandardCharsets.UTF_8) + ".json");
    }

    @Override
    public synchronized void save(Task task, boolean isReplicated) {
        super.save(task, isReplicated);
        write(task);
    }

    @Override
    public synchronized void delete(String taskId) {
        super.delete(taskId);
        try {
            Files.deleteIfExists(file(taskId));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private void write(Task task) {
        Path target = file(task.id());
        Path tmp = target.resolveSibling(target.getFileName() + "." + ProcessHandle.current().pid() + ".tmp");
        try {
            Files.writeString(tmp, JsonFormat.printer().print(ProtoUtils.ToProto.task(task)));
            Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private List<Path> files() {
        try (Stream<Path> paths = Files.list(dir)) {
            return paths.filter(p -> p.getFileName().toString().endsWith(".json")).toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static Task read(Path file) throws IOException {
        io.a2a.grpc.Task.Builder builder = io.a2a.grpc.Task.newBuilder();
        try {
            JsonFormat.parser().ignoringUnknownFields().merge(Files.readString(file), builder);
        } catch (InvalidProtocolBufferException e) {
            throw new IOException(file + ": " + e.getMessage(), e);
        }
        return ProtoUtils.FromProto.task(builder);
    }

    /** Forget every stored task (the "worker forgets tasks" variant). */
    synchronized void clear() {
        for (Path file : files()) {
            try {
                Files.deleteIfExists(file);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** Load the stored tasks; each one still in flight is saved back as failed. How many were. */
    synchronized int rehydrate() throws IOException {
        int failed = 0;
        for (Path file : files()) {
            Task task = read(file);
            if (task.status() != null && task.status().state() != null && task.status().state().isFinal()) {
                super.save(task, false);
                continue;
            }
            Message why = Message.builder()
                    .role(Message.Role.ROLE_AGENT)
                    .messageId(UUID.randomUUID().toString())
                    .taskId(task.id())
                    .contextId(task.contextId())
                    .parts(List.of(new TextPart("worker restarted: the in-flight job was lost")))
                    .build();
            save(Task.builder(task)
                    .status(new TaskStatus(TaskState.TASK_STATE_FAILED, why, OffsetDateTime.now()))
                    .build(), false);
            failed += 1;
        }
        return failed;
    }
}
