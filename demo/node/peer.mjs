// What the Node peers (echo_peer.mjs, worker.mjs) share: message and event builders, the A2A
// routes, and serving them on loopback. @a2a-js/sdk keeps parts as ts-proto oneofs in memory
// ({content: {$case, value}}), not as wire JSON.
import express from 'express';
import { randomUUID } from 'node:crypto';
import { AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent } from '@a2a-js/sdk/server';
import {
  agentCardHandler,
  jsonRpcHandler,
  restHandler,
  UserBuilder,
} from '@a2a-js/sdk/server/express';

export const HEARTBEAT_URI = 'urn:otel-a2a:heartbeat:v1';
const JSONRPC_PATH = '/a2a/jsonrpc';
const REST_PATH = '/a2a/rest';

export const now = () => new Date().toISOString();

export const textPart = (value) => ({
  content: { $case: 'text', value },
  filename: '',
  mediaType: 'text/plain',
  metadata: undefined,
});

export const agentMessage = (taskId, contextId, value) => ({
  messageId: randomUUID(),
  taskId,
  contextId,
  role: Role.ROLE_AGENT,
  parts: [textPart(value)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});

export const messageText = (message) =>
  (message?.parts ?? [])
    .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
    .join('\n')
    .trim();

// A status update, with an agent message when `text` is given.
export const publishStatus = (bus, taskId, contextId, state, text) => {
  const status = { state, timestamp: now() };
  if (text) status.message = agentMessage(taskId, contextId, text);
  bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status, metadata: undefined }));
};

// The first event of a new task MUST be the Task itself.
export const publishSubmitted = (bus, taskId, contextId, userMessage) =>
  bus.publish(
    AgentEvent.task({
      id: taskId,
      contextId,
      status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now() },
      artifacts: [],
      history: [userMessage],
      metadata: undefined,
    }),
  );

// An Express app serving `handler`: the card at the well-known path (ETag, Cache-Control
// max-age=cardMaxAge, 304), JSON-RPC at /a2a/jsonrpc, HTTP+JSON at /a2a/rest; `legacyCompat`
// (optional) also answers v0.3 calls on both.
export const a2aApp = (handler, { cardMaxAge, legacyCompat }) => {
  const app = express();
  app.use(
    `/${AGENT_CARD_PATH}`,
    agentCardHandler({ agentCardProvider: handler, cache: { maxAge: cardMaxAge } }),
  );
  const options = { requestHandler: handler, userBuilder: UserBuilder.noAuthentication };
  if (legacyCompat) options.legacyCompat = legacyCompat;
  app.use(JSONRPC_PATH, jsonRpcHandler(options));
  app.use(REST_PATH, restHandler(options));
  return app;
};

// Listen on 127.0.0.1:port, point the card's interfaces at the routes of `a2aApp` (by binding),
// print `READY <base>` (the parent waits for it), and stop on SIGTERM/SIGINT: open streams are
// cut, and a connection that will not close cannot keep the process alive past one second.
export const serve = (app, port, card) => {
  const server = app.listen(port, '127.0.0.1', (err) => {
    if (err) {
      console.error(`listen failed: ${err.message}`);
      process.exit(1);
    }
    const base = `http://127.0.0.1:${server.address().port}`;
    for (const iface of card.supportedInterfaces) {
      iface.url = `${base}${iface.protocolBinding === 'JSONRPC' ? JSONRPC_PATH : REST_PATH}`;
    }
    process.stdout.write(`READY ${base}\n`);
  });
  server.on('error', (err) => {
    console.error(`server error: ${err.message}`);
    process.exit(1);
  });
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections?.();
    setTimeout(() => process.exit(0), 1000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  return server;
};
