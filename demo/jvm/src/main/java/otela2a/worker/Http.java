package otela2a.worker;

import static io.a2a.server.ServerCallContext.TRANSPORT_KEY;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonSyntaxException;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.a2a.grpc.utils.JSONRPCUtils;
import io.a2a.jsonrpc.common.json.IdJsonMappingException;
import io.a2a.jsonrpc.common.json.InvalidParamsJsonMappingException;
import io.a2a.jsonrpc.common.json.JsonMappingException;
import io.a2a.jsonrpc.common.json.JsonProcessingException;
import io.a2a.jsonrpc.common.json.MethodNotFoundJsonMappingException;
import io.a2a.jsonrpc.common.wrappers.A2AErrorResponse;
import io.a2a.jsonrpc.common.wrappers.A2ARequest;
import io.a2a.jsonrpc.common.wrappers.A2AResponse;
import io.a2a.jsonrpc.common.wrappers.CancelTaskRequest;
import io.a2a.jsonrpc.common.wrappers.CancelTaskResponse;
import io.a2a.jsonrpc.common.wrappers.CreateTaskPushNotificationConfigRequest;
import io.a2a.jsonrpc.common.wrappers.CreateTaskPushNotificationConfigResponse;
import io.a2a.jsonrpc.common.wrappers.DeleteTaskPushNotificationConfigRequest;
import io.a2a.jsonrpc.common.wrappers.DeleteTaskPushNotificationConfigResponse;
import io.a2a.jsonrpc.common.wrappers.GetExtendedAgentCardRequest;
import io.a2a.jsonrpc.common.wrappers.GetExtendedAgentCardResponse;
import io.a2a.jsonrpc.common.wrappers.GetTaskPushNotificationConfigRequest;
import io.a2a.jsonrpc.common.wrappers.GetTaskPushNotificationConfigResponse;
import io.a2a.jsonrpc.common.wrappers.GetTaskRequest;
import io.a2a.jsonrpc.common.wrappers.GetTaskResponse;
import io.a2a.jsonrpc.common.wrappers.ListTaskPushNotificationConfigRequest;
import io.a2a.jsonrpc.common.wrappers.ListTaskPushNotificationConfigResponse;
import io.a2a.jsonrpc.common.wrappers.ListTasksRequest;
import io.a2a.jsonrpc.common.wrappers.ListTasksResponse;
import io.a2a.jsonrpc.common.wrappers.NonStreamingJSONRPCRequest;
import io.a2a.jsonrpc.common.wrappers.SendMessageRequest;
import io.a2a.jsonrpc.common.wrappers.SendMessageResponse;
import io.a2a.jsonrpc.common.wrappers.SendStreamingMessageRequest;
import io.a2a.jsonrpc.common.wrappers.SendStreamingMessageResponse;
import io.a2a.jsonrpc.common.wrappers.SubscribeToTaskRequest;
import io.a2a.server.ServerCallContext;
import io.a2a.server.auth.UnauthenticatedUser;
import io.a2a.server.extensions.A2AExtensions;
import io.a2a.server.util.sse.SseFormatter;
import io.a2a.spec.A2AError;
import io.a2a.spec.InternalError;
import io.a2a.spec.InvalidParamsError;
import io.a2a.spec.InvalidRequestError;
import io.a2a.spec.JSONParseError;
import io.a2a.spec.MethodNotFoundError;
import io.a2a.spec.TransportProtocol;
import io.a2a.spec.UnsupportedOperationError;
import io.a2a.transport.jsonrpc.context.JSONRPCContextKeys;
import io.a2a.transport.jsonrpc.handler.JSONRPCHandler;
import io.a2a.transport.rest.handler.RestHandler;
import io.a2a.transport.rest.handler.RestHandler.HTTPRestResponse;
import io.a2a.transport.rest.handler.RestHandler.HTTPRestStreamingResponse;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The HTTP layer the SDK leaves to its (Quarkus) reference servers, on the JDK's HTTP server:
 * routes, the call context, SSE framing. Every A2A decision is the SDK's: this class only
 * calls {@link JSONRPCHandler} and {@link RestHandler} the way the reference routes do.
 *
 * <p>Two bridges to the final v1.0 wire, both documented in docs/runtimes.md: the protocol
 * version is read from {@code A2A-Version} as well as the pre-release {@code X-A2A-Version},
 * and a SendMessage's {@code configuration.returnImmediately} becomes the pre-release
 * {@code blocking} (its negation) before the SDK's strict proto parser sees it.
 */
final class Http {
    static final String JSONRPC_PATH = "/a2a/jsonrpc";
    static final String REST_PATH = "/a2a/rest";
    private static final String CARD_PATH = "/.well-known/agent-card.json";

    private final JSONRPCHandler jsonrpc;
    private final RestHandler rest;
    private final byte[] card;
    private final String etag;
    private final Worker.Options options;

    Http(JSONRPCHandler jsonrpc, RestHandler rest, String cardJson, Worker.Options options) {
        this.jsonrpc = jsonrpc;
        this.rest = rest;
        this.card = cardJson.getBytes(StandardCharsets.UTF_8);
        this.options = options;
        try {
            this.etag = "\"" + HexFormat.of().formatHex(MessageDigest.getInstance("MD5").digest(card)) + "\"";
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    void mount(HttpServer server) {
        server.createContext(CARD_PATH, guarded(this::card));
        server.createContext(JSONRPC_PATH, guarded(this::jsonrpc));
        server.createContext(REST_PATH, guarded(this::rest));
        server.createContext("/", guarded(ex -> send(ex, 404, "application/json", "{\"error\":\"not found\"}")));
    }

    interface Route {
        void handle(HttpExchange exchange) throws IOException;
    }

    private com.sun.net.httpserver.HttpHandler guarded(Route route) {
        return exchange -> {
            try (exchange) {
                route.handle(exchange);
            } catch (IOException e) {
                // the client went away
            } catch (RuntimeException e) {
                Worker.log("request failed: " + e);
            }
        };
    }

    private static void send(HttpExchange ex, int status, String contentType, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", contentType);
        ex.sendResponseHeaders(status, bytes.length == 0 ? -1 : bytes.length);
        if (bytes.length > 0) {
            try (OutputStream out = ex.getResponseBody()) {
                out.write(bytes);
            }
        }
    }

    // -- the card -------------------------------------------------------------------------

    /**
     * The static descriptor's bytes, Cache-Control max-age and, by --card-etag, a quoted MD5
     * ETag that a matching If-None-Match revalidates with 304 ("md5"), the same ETag with the
     * full card every time ("md5-200", the seed's habit), or no ETag ("none").
     */
    private void card(HttpExchange ex) throws IOException {
        if (!ex.getRequestMethod().equals("GET") && !ex.getRequestMethod().equals("HEAD")) {
            send(ex, 405, "application/json", "{\"error\":\"method not allowed\"}");
            return;
        }
        var headers = ex.getResponseHeaders();
        headers.set("Cache-Control", "public, max-age=" + (long) options.cardMaxAge());
        if (!options.cardEtag().equals("none")) {
            headers.set("ETag", etag);
            String match = ex.getRequestHeaders().getFirst("If-None-Match");
            if (options.cardEtag().equals("md5") && match != null
                    && List.of(match.split("\\s*,\\s*")).stream().anyMatch(t -> t.equals(etag) || t.equals("W/" + etag) || t.equals("*"))) {
                ex.sendResponseHeaders(304, -1);
                return;
            }
        }
        headers.set("Content-Type", "application/json");
        if (ex.getRequestMethod().equals("HEAD")) {
            ex.sendResponseHeaders(200, -1);
            return;
        }
        ex.sendResponseHeaders(200, card.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(card);
        }
    }

    // -- call context and the v1.0 bridges ------------------------------------------------

    private static ServerCallContext context(HttpExchange ex, TransportProtocol transport, String method) {
        Map<String, String> headers = new HashMap<>();
        ex.getRequestHeaders().forEach((name, values) -> headers.put(name, String.join(",", values)));
        Map<String, Object> state = new HashMap<>();
        state.put(JSONRPCContextKeys.HEADERS_KEY, headers);
        state.put(JSONRPCContextKeys.TENANT_KEY, "");
        state.put(JSONRPCContextKeys.METHOD_NAME_KEY, method);
        state.put(TRANSPORT_KEY, transport);
        String version = ex.getRequestHeaders().getFirst("A2A-Version");
        if (version == null) {
            version = ex.getRequestHeaders().getFirst("X-A2A-Version");
        }
        List<String> extensions = new java.util.ArrayList<>();
        for (String name : List.of("A2A-Extensions", "X-A2A-Extensions")) {
            List<String> values = ex.getRequestHeaders().get(name);
            if (values != null) {
                extensions.addAll(values);
            }
        }
        return new ServerCallContext(UnauthenticatedUser.INSTANCE, state,
                A2AExtensions.getRequestedExtensions(extensions), version);
    }

    /**
     * A SendMessage's {@code configuration.returnImmediately} (final v1.0, default false) as
     * the pre-release {@code blocking}, its negation (default false there): absent means
     * blocking. A body that is no JSON object is left to the SDK's parser to refuse.
     */
    static String bridgeSendConfiguration(String body, boolean jsonrpc) {
        JsonElement parsed;
        try {
            parsed = JsonParser.parseString(body);
        } catch (JsonSyntaxException e) {
            return body;
        }
        if (!parsed.isJsonObject()) {
            return body;
        }
        JsonObject root = parsed.getAsJsonObject();
        JsonElement method = root.get("method");
        if (jsonrpc && !(method != null && method.isJsonPrimitive() && method.getAsString().equals("SendMessage"))) {
            return body;
        }
        JsonElement params = jsonrpc ? root.get("params") : root;
        if (params == null || !params.isJsonObject()) {
            return body;
        }
        JsonElement configuration = params.getAsJsonObject().get("configuration");
        if (configuration == null) {
            configuration = new JsonObject();
            params.getAsJsonObject().add("configuration", configuration);
        }
        if (!configuration.isJsonObject()) {
            return body;
        }
        JsonObject config = configuration.getAsJsonObject();
        JsonElement immediately = config.remove("returnImmediately");
        if (!config.has("blocking")) {
            boolean now = immediately != null && immediately.isJsonPrimitive() && immediately.getAsBoolean();
            config.addProperty("blocking", !now);
        }
        return root.toString();
    }

    private static String read(HttpExchange ex) throws IOException {
        return new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
    }

    // -- JSON-RPC -------------------------------------------------------------------------

    private void jsonrpc(HttpExchange ex) throws IOException {
        if (!ex.getRequestMethod().equals("POST")) {
            send(ex, 405, "application/json", "{\"error\":\"method not allowed\"}");
            return;
        }
        String body = bridgeSendConfiguration(read(ex), true);
        ServerCallContext context = context(ex, TransportProtocol.JSONRPC, "");
        A2AResponse<?> response;
        Flow.Publisher<? extends A2AResponse<?>> stream = null;
        try {
            A2ARequest<?> request = JSONRPCUtils.parseRequestBody(body, "");
            context.getState().put(JSONRPCContextKeys.METHOD_NAME_KEY, request.getMethod());
            if (request instanceof NonStreamingJSONRPCRequest<?> call) {
                response = call(call, context);
            } else if (request instanceof SendStreamingMessageRequest req) {
                response = null;
                stream = jsonrpc.onMessageSendStream(req, context);
            } else if (request instanceof SubscribeToTaskRequest req) {
                response = null;
                stream = jsonrpc.onSubscribeToTask(req, context);
            } else {
                response = new A2AErrorResponse(request.getId(), new UnsupportedOperationError());
            }
        } catch (A2AError e) {
            response = new A2AErrorResponse(e);
        } catch (InvalidParamsJsonMappingException e) {
            response = new A2AErrorResponse(e.getId(), new InvalidParamsError(null, e.getMessage(), null));
        } catch (MethodNotFoundJsonMappingException e) {
            response = new A2AErrorResponse(e.getId(), new MethodNotFoundError(null, e.getMessage(), null));
        } catch (IdJsonMappingException e) {
            response = new A2AErrorResponse(e.getId(), new InvalidRequestError(null, e.getMessage(), null));
        } catch (JsonMappingException e) {
            response = new A2AErrorResponse(new InvalidRequestError(null, e.getMessage(), null));
        } catch (JsonSyntaxException | JsonProcessingException e) {
            response = new A2AErrorResponse(new JSONParseError(e.getMessage()));
        } catch (RuntimeException e) {
            response = new A2AErrorResponse(new InternalError(e.getMessage()));
        }
        if (stream != null) {
            AtomicLong ids = new AtomicLong();
            sse(ex, context, stream, item -> SseFormatter.formatResponseAsSSE(item, ids.getAndIncrement()));
        } else {
            send(ex, 200, "application/json", serialize(response));
        }
    }

    private A2AResponse<?> call(NonStreamingJSONRPCRequest<?> request, ServerCallContext context) {
        if (request instanceof GetTaskRequest req) {
            return jsonrpc.onGetTask(req, context);
        } else if (request instanceof CancelTaskRequest req) {
            return jsonrpc.onCancelTask(req, context);
        } else if (request instanceof ListTasksRequest req) {
            return jsonrpc.onListTasks(req, context);
        } else if (request instanceof SendMessageRequest req) {
            return jsonrpc.onMessageSend(req, context);
        } else if (request instanceof CreateTaskPushNotificationConfigRequest req) {
            return jsonrpc.setPushNotificationConfig(req, context);
        } else if (request instanceof GetTaskPushNotificationConfigRequest req) {
            return jsonrpc.getPushNotificationConfig(req, context);
        } else if (request instanceof ListTaskPushNotificationConfigRequest req) {
            return jsonrpc.listPushNotificationConfig(req, context);
        } else if (request instanceof DeleteTaskPushNotificationConfigRequest req) {
            return jsonrpc.deletePushNotificationConfig(req, context);
        } else if (request instanceof GetExtendedAgentCardRequest req) {
            return jsonrpc.onGetExtendedCardRequest(req, context);
        }
        return new A2AErrorResponse(request.getId(), new UnsupportedOperationError());
    }

    /** As the reference server's serializeResponse: errors by Gson, results as proto JSON. */
    private static String serialize(A2AResponse<?> response) {
        if (response instanceof A2AErrorResponse error) {
            return JSONRPCUtils.toJsonRPCErrorResponse(error.getId(), error.getError());
        }
        if (response.getError() != null) {
            return JSONRPCUtils.toJsonRPCErrorResponse(response.getId(), response.getError());
        }
        com.google.protobuf.MessageOrBuilder proto;
        if (response instanceof GetTaskResponse r) {
            proto = io.a2a.grpc.utils.ProtoUtils.ToProto.task(r.getResult());
        } else if (response instanceof CancelTaskResponse r) {
            proto = io.a2a.grpc.utils.ProtoUtils.ToProto.task(r.getResult());
        } else if (response instanceof SendMessageResponse r) {
            proto = io.a2a.grpc.utils.ProtoUtils.ToProto.taskOrMessage(r.getResult());
        } else if (response instanceof ListTasksResponse r) {
            proto = io.a2a.grpc.utils.ProtoUtils.ToProto.listTasksResult(r.getResult());
        } else if (response instanceof CreateTaskPushNotificationConfigResponse r) {
            proto = io.a2a.grpc.utils.ProtoUtils.ToProto.createTaskPushNotificationConfigResponse(r.getResult());
        } else if (response instanceof GetTaskPushNotificationConfigResponse r) {
            proto = io.a2a.grpc.utils.ProtoUtils.ToProto.getTaskPushNotificationConfigResponse(r.getResult());
        } else if (response instanceof ListTaskPushNotificationConfigResponse r) {
            proto = io.a2a.grpc.utils.ProtoUtils.ToProto.listTaskPushNotificationConfigResponse(r.getResult());
        } else if (response instanceof DeleteTaskPushNotificationConfigResponse) {
            proto = com.google.protobuf.Empty.getDefaultInstance();
        } else if (response instanceof GetExtendedAgentCardResponse r) {
            proto = io.a2a.grpc.utils.ProtoUtils.ToProto.getExtendedCardResponse(r.getResult());
        } else if (response instanceof SendStreamingMessageResponse r) {
            proto = io.a2a.grpc.utils.ProtoUtils.ToProto.taskOrMessageStream(r.getResult());
        } else {
            return JSONRPCUtils.toJsonRPCErrorResponse(response.getId(), new InternalError("unknown response type"));
        }
        return JSONRPCUtils.toJsonRPCResultResponse(response.getId(), proto);
    }

    // -- SSE ------------------------------------------------------------------------------

    /**
     * Write each item as one SSE event, flushed, one at a time (request(1) after each write);
     * when the client goes away, cancel the subscription and tell the SDK's event consumer.
     */
    private static <T> void sse(HttpExchange ex, ServerCallContext context, Flow.Publisher<T> publisher,
                                Function<T, String> frame) throws IOException {
        ex.getResponseHeaders().set("Content-Type", "text/event-stream");
        ex.getResponseHeaders().set("Cache-Control", "no-cache");
        ex.sendResponseHeaders(200, 0);
        OutputStream out = ex.getResponseBody();
        CountDownLatch done = new CountDownLatch(1);
        publisher.subscribe(new Flow.Subscriber<T>() {
            private Flow.Subscription subscription;

            @Override
            public void onSubscribe(Flow.Subscription s) {
                subscription = s;
                s.request(1);
            }

            @Override
            public void onNext(T item) {
                try {
                    out.write(frame.apply(item).getBytes(StandardCharsets.UTF_8));
                    out.flush();
                    subscription.request(1);
                } catch (IOException e) {
                    subscription.cancel();
                    context.invokeEventConsumerCancelCallback();
                    done.countDown();
                }
            }

            @Override
            public void onError(Throwable t) {
                done.countDown();
            }

            @Override
            public void onComplete() {
                done.countDown();
            }
        });
        try {
            done.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        out.close();
    }

    // -- HTTP+JSON ------------------------------------------------------------------------

    private static final Pattern TASK = Pattern.compile("^/tasks/([^/:]+)(?::(cancel|subscribe))?$");
    private static final Pattern PUSH = Pattern.compile("^/tasks/([^/:]+)/pushNotificationConfigs(?:/([^/]+))?/?$");

    private static Map<String, String> query(HttpExchange ex) {
        Map<String, String> out = new HashMap<>();
        String raw = ex.getRequestURI().getRawQuery();
        if (raw == null || raw.isEmpty()) {
            return out;
        }
        for (String pair : raw.split("&")) {
            String[] kv = pair.split("=", 2);
            out.put(URLDecoder.decode(kv[0], StandardCharsets.UTF_8),
                    kv.length == 2 ? URLDecoder.decode(kv[1], StandardCharsets.UTF_8) : "");
        }
        return out;
    }

    private static Integer integer(String value) {
        return value == null ? null : Integer.valueOf(value);
    }

    private void rest(HttpExchange ex) throws IOException {
        String path = URLDecoder.decode(ex.getRequestURI().getRawPath().substring(REST_PATH.length()), StandardCharsets.UTF_8);
        String method = ex.getRequestMethod();
        Map<String, String> q = query(ex);
        ServerCallContext context = context(ex, TransportProtocol.HTTP_JSON, path);
        HTTPRestResponse response;
        try {
            Matcher task = TASK.matcher(path);
            Matcher push = PUSH.matcher(path);
            if (path.equals("/message:send") && method.equals("POST")) {
                response = rest.sendMessage(context, "", bridgeSendConfiguration(read(ex), false));
            } else if (path.equals("/message:stream") && method.equals("POST")) {
                response = rest.sendStreamingMessage(context, "", read(ex));
            } else if (path.equals("/tasks") && method.equals("GET")) {
                response = rest.listTasks(context, "", q.get("contextId"), q.get("status"), integer(q.get("pageSize")),
                        q.get("pageToken"), integer(q.get("historyLength")), q.get("statusTimestampAfter"),
                        q.containsKey("includeArtifacts") ? Boolean.valueOf(q.get("includeArtifacts")) : null);
            } else if (task.matches() && task.group(2) == null && method.equals("GET")) {
                response = rest.getTask(context, "", task.group(1), integer(q.get("historyLength")));
            } else if (task.matches() && "cancel".equals(task.group(2)) && method.equals("POST")) {
                response = rest.cancelTask(context, "", task.group(1));
            } else if (task.matches() && "subscribe".equals(task.group(2)) && (method.equals("POST") || method.equals("GET"))) {
                response = rest.subscribeToTask(context, "", task.group(1));
            } else if (push.matches() && push.group(2) == null && method.equals("POST")) {
                response = rest.createTaskPushNotificationConfiguration(context, "", read(ex), push.group(1));
            } else if (push.matches() && push.group(2) == null && method.equals("GET")) {
                response = rest.listTaskPushNotificationConfigurations(context, "", push.group(1),
                        q.containsKey("pageSize") ? Integer.parseInt(q.get("pageSize")) : 0, q.getOrDefault("pageToken", ""));
            } else if (push.matches() && method.equals("GET")) {
                response = rest.getTaskPushNotificationConfiguration(context, "", push.group(1), push.group(2));
            } else if (push.matches() && method.equals("DELETE")) {
                response = rest.deleteTaskPushNotificationConfiguration(context, "", push.group(1), push.group(2));
            } else if (path.equals("/extendedAgentCard") && method.equals("GET")) {
                response = rest.getExtendedAgentCard(context, "");
            } else {
                response = rest.createErrorResponse(new MethodNotFoundError());
            }
        } catch (NumberFormatException e) {
            response = rest.createErrorResponse(new InvalidParamsError(null, e.getMessage(), null));
        }
        if (response instanceof HTTPRestStreamingResponse streaming) {
            AtomicLong ids = new AtomicLong();
            sse(ex, context, streaming.getPublisher(), json -> SseFormatter.formatJsonAsSSE(json, ids.getAndIncrement()));
        } else {
            send(ex, response.getStatusCode(), response.getContentType(), response.getBody());
        }
    }
}
