// Message helpers shared by the Node peers (echo_peer.mjs, worker.mjs): @a2a-js/sdk keeps
// parts as ts-proto oneofs in memory ({content: {$case, value}}), not as wire JSON.
import { randomUUID } from 'node:crypto';
import { Role } from '@a2a-js/sdk';

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
