package otela2a.worker;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.protobuf.util.JsonFormat;
import com.sun.net.httpserver.HttpServer;
import io.a2a.grpc.utils.ProtoUtils;
import io.a2a.server.events.InMemoryQueueManager;
import io.a2a.server.events.CountingMainEventBus;
import io.a2a.server.events.MainEventBusProcessor;
import io.a2a.server.requesthandlers.DefaultRequestHandler;
import io.a2a.server.requesthandlers.RequestHandler;
import io.a2a.server.tasks.InMemoryPushNotificationConfigStore;
import io.a2a.server.tasks.InMemoryTaskStore;
import io.a2a.spec.AgentCard;
import io.a2a.transport.jsonrpc.handler.JSONRPCHandler;
import io.a2a.transport.rest.handler.RestHandler;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The seeded incident's worker on the A2A Java SDK, wired without CDI on the JDK's HTTP server.
 *
 * <pre>
 *   java -jar a2a-jvm-worker.jar --port N --store DIR [--card-version V] [--heartbeat S]
 *        [--job-seconds S] [--card-max-age S] [--card-etag md5|md5-200|none] [--forget]
 *   java -jar a2a-jvm-worker.jar --agent behave --port N [--slow-timeout S] [--card-etag ...]
 * </pre>
 *
 * Prints "READY &lt;base_url&gt;" on stdout once listening on 127.0.0.1 (N = 0 picks a free port).
 * Serves the card from a static descriptor (agent-card.json: streaming true, the heartbeat
 * extension), v1.0 JSON-RPC at /a2a/jsonrpc and v1.0 HTTP+JSON at /a2a/rest. Tasks live in
 * DIR ({@link FileTaskStore}); --forget starts with an empty store. {@code --agent behave} is
 * the test peer instead ({@link BehaviourExecutor}, peer-card.json, the SDK's in-memory store
 * unless --store is given).
 */
public final class Worker {
    static {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
    }

    private Worker() {}

    static void log(String line) {
        System.err.println("[worker " + Instant.now() + "] " + line);
    }

    /** The command line, as worker.mjs reads it. */
    record Options(String agent, int port, Path store, String cardVersion, double heartbeat,
                   double jobSeconds, double slowTimeout, double cardMaxAge, String cardEtag, boolean forget) {

        boolean behave() {
            return agent.equals("behave");
        }


        static Options parse(String[] argv) {
            String agent = "long-job";
            int port = 0;
            String store = "";
            double slowTimeout = 30;
            String cardVersion = "1.0.0";
            double heartbeat = 30;
            double jobSeconds = 600;
            double cardMaxAge = 300;
            String cardEtag = "md5-200";
            boolean forget = false;
            for (int i = 0; i < argv.length; i++) {
                String[] split = argv[i].split("=", 2);
                String flag = split[0];
                if (flag.equals("--forget")) {
                    forget = true;
                    continue;
                }
                String value;
                if (split.length == 2) {
                    value = split[1];
                } else if (i + 1 < argv.length) {
                    value = argv[++i];
                } else {
                    throw new IllegalArgumentException(flag + " needs a value");
                }
                switch (flag) {
                    case "--agent" -> agent = value;
                    case "--slow-timeout" -> slowTimeout = Double.parseDouble(value);
                    case "--port" -> port = Integer.parseInt(value);
                    case "--store" -> store = value;
                    case "--card-version" -> cardVersion = value;
                    case "--heartbeat" -> heartbeat = Double.parseDouble(value);
                    case "--job-seconds" -> jobSeconds = Double.parseDouble(value);
                    case "--card-max-age" -> cardMaxAge = Double.parseDouble(value);
                    case "--card-etag" -> cardEtag = value;
                    default -> throw new IllegalArgumentException("unknown option " + flag);
                }
            }
            if (port < 0 || port > 65535) {
                throw new IllegalArgumentException("bad --port " + port);
            }
            if (!agent.matches("long-job|behave")) {
                throw new IllegalArgumentException("--agent is long-job or behave");
            }
            if (store.isEmpty() && agent.equals("long-job")) {
                throw new IllegalArgumentException("--store DIR is required");
            }
            if (!(slowTimeout > 0 && slowTimeout <= 30)) {
                throw new IllegalArgumentException("--slow-timeout is > 0 and <= 30");
            }
            if (!(heartbeat > 0) || !(jobSeconds >= 0) || !(cardMaxAge >= 0)) {
                throw new IllegalArgumentException("--heartbeat must be > 0, --job-seconds and --card-max-age >= 0");
            }
            if (!cardEtag.matches("md5|md5-200|none")) {
                throw new IllegalArgumentException("--card-etag is md5, md5-200 or none");
            }
            return new Options(agent, port, store.isEmpty() ? null : Path.of(store).toAbsolutePath(), cardVersion,
                    heartbeat, jobSeconds, slowTimeout, cardMaxAge, cardEtag, forget);
        }
    }

    /** The static descriptor with this run's version, heartbeat and interface URLs filled in. */
    static String cardJson(Options options, String base) throws IOException {
        String text;
        String descriptor = options.behave() ? "/peer-card.json" : "/agent-card.json";
        try (InputStream in = Worker.class.getResourceAsStream(descriptor)) {
            if (in == null) {
                throw new IOException(descriptor + " missing from the jar");
            }
            text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        JsonObject card = JsonParser.parseString(text).getAsJsonObject();
        if (!options.behave()) {
            card.addProperty("version", options.cardVersion());
        }
        for (var iface : card.getAsJsonArray("supportedInterfaces")) {
            JsonObject object = iface.getAsJsonObject();
            boolean jsonrpc = object.get("protocolBinding").getAsString().equals("JSONRPC");
            object.addProperty("url", base + (jsonrpc ? Http.JSONRPC_PATH : Http.REST_PATH));
        }
        for (var ext : options.behave() ? new com.google.gson.JsonArray() : card.getAsJsonObject("capabilities").getAsJsonArray("extensions")) {
            JsonObject object = ext.getAsJsonObject();
            if (object.get("uri").getAsString().equals("urn:otel-a2a:heartbeat:v1")) {
                double heartbeat = options.heartbeat();
                object.getAsJsonObject("params").addProperty("intervalSeconds",
                        heartbeat == Math.rint(heartbeat) ? (Number) (long) heartbeat : (Number) heartbeat);
            }
        }
        return card.toString();
    }

    static AgentCard parseCard(String json) throws IOException {
        io.a2a.grpc.AgentCard.Builder builder = io.a2a.grpc.AgentCard.newBuilder();
        JsonFormat.parser().merge(json, builder);
        return ProtoUtils.FromProto.agentCard(builder);
    }

    /** A package-private member of the SDK that its CDI container would have set or called. */
    private static void sdkInternals(DefaultRequestHandler handler, MainEventBusProcessor processor) throws ReflectiveOperationException {
        Method start = MainEventBusProcessor.class.getDeclaredMethod("start");
        start.setAccessible(true);
        start.invoke(processor);
        // create() sets 5 s for a blocking SendMessage to wait on the agent and 2 s on the
        // consumer; the reference servers read 30 s and 5 s from their configuration.
        for (String[] pair : new String[][] {{"agentCompletionTimeoutSeconds", "30"}, {"consumptionCompletionTimeoutSeconds", "5"}}) {
            Field field = DefaultRequestHandler.class.getDeclaredField(pair[0]);
            field.setAccessible(true);
            field.setInt(handler, Integer.parseInt(pair[1]));
        }
    }

    public static void main(String[] argv) throws Exception {
        Options options;
        try {
            options = Options.parse(argv);
        } catch (IllegalArgumentException e) {
            System.err.println(e.getMessage());
            System.exit(2);
            return;
        }

        InMemoryTaskStore store;
        if (options.store() == null) {
            store = new InMemoryTaskStore();
        } else {
            FileTaskStore files = new FileTaskStore(options.store());
            if (options.forget()) {
                files.clear();
                log("started with an empty store (--forget)");
            } else {
                int failed = files.rehydrate();
                if (failed > 0) {
                    log("rehydrated " + failed + " in-flight task(s) as TASK_STATE_FAILED");
                }
            }
            store = files;
        }

        HttpServer server;
        try {
            server = HttpServer.create(new InetSocketAddress("127.0.0.1", options.port()), 64);
        } catch (BindException e) {
            System.err.println("listen failed: address already in use (" + e.getMessage() + ")");
            System.exit(1);
            return;
        }
        String base = "http://127.0.0.1:" + server.getAddress().getPort();
        String cardJson = cardJson(options, base);
        AgentCard card = parseCard(cardJson);

        ExecutorService executor = Executors.newCachedThreadPool(r -> {
            Thread thread = new Thread(r);
            thread.setDaemon(true);
            return thread;
        });
        CountingMainEventBus bus = new CountingMainEventBus();
        InMemoryQueueManager queues = new InMemoryQueueManager(store, bus);
        InMemoryPushNotificationConfigStore pushConfigs = new InMemoryPushNotificationConfigStore();
        MainEventBusProcessor processor = new MainEventBusProcessor(bus, store, task -> {}, queues);
        DefaultRequestHandler handler = DefaultRequestHandler.create(
                options.behave() ? new BehaviourExecutor(options.slowTimeout())
                        : new LongJobExecutor(options.heartbeat(), options.jobSeconds()),
                store, queues, pushConfigs,
                processor, executor, executor);
        sdkInternals(handler, processor);
        Settled settled = new Settled(handler, store, bus);
        processor.setCallback(settled);
        RequestHandler traced = Telemetry.wrap(settled, Telemetry.openTelemetry(System.getenv()));

        Http http = new Http(new JSONRPCHandler(card, traced, executor), new RestHandler(card, traced, executor),
                cardJson, options);
        http.mount(server);
        server.setExecutor(executor);
        server.start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> server.stop(0)));
        System.out.println("READY " + base);
        System.out.flush();
    }
}
