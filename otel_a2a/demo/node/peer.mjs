// What the Node peers (echo_peer.mjs, worker.mjs) share: message and event builders, and
// serving an Express app on loopback. @a2a-js/sdk keeps parts as ts-proto oneofs in memory
// ({content: {$case, value}}), not as wire JSON.
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent } from '@a2a-js/sdk/server';

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

// Listen on 127.0.0.1:port, let `ready(base)` fix the card's URLs, print `READY <base>` (the
// parent waits for it), and stop on SIGTERM/SIGINT: open streams are cut, and a connection
// that will not close cannot keep the process alive past one second.
export const serve = (app, port, ready) => {
  const server = app.listen(port, '127.0.0.1', (err) => {
    if (err) {
      console.error(`listen failed: ${err.message}`);
      process.exit(1);
    }
    const base = `http://127.0.0.1:${server.address().port}`;
    ready(base);
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
