// A real A2A peer on @a2a-js/sdk 1.3.0 + express 5, for otel-a2a's tests and demo.
//
//   node echo_peer.mjs --port N [--slow-timeout S]     (N = 0 picks a free port)
//
// Prints "READY <base_url>" on stdout once listening on 127.0.0.1, then serves:
//   /.well-known/agent-card.json  the card, Cache-Control: public, max-age=300, weak ETag, 304
//   /a2a/jsonrpc                  v1.0 JSON-RPC; v0.3 names when no A2A-Version (legacyCompat)
//   /a2a/rest                     v1.0 HTTP+JSON; v0.3 /v1/... routes (legacyCompat)
//   /compat/.well-known/agent-card.json  the same card through the SDK's legacyCompat card
//                                 handler: a v0.3-shaped card without A2A-Version, the v1.0 one
//                                 with it, each with its own ETag (Vary: A2A-Version)
//
// The behaviour follows the first word of the message text (same as tests/peers/python_peer.py):
//   echo ... (and anything not below)  submitted, working, artifact, completed
//   slow ...    submitted, working, then waits (<= --slow-timeout s, default 30, at most 30) for
//               a follow-up message on the task or a cancel; the follow-up's text then decides
//               (echo completes it); on timeout the task fails
//   input ...   submitted, working, input-required (a follow-up continues the task)
//   fail        submitted, working, failed
//   reject      submitted, rejected
// Cancel is supported on any non-terminal task.
import { randomUUID } from 'node:crypto';
import {
  a2aApp,
  HEARTBEAT_URI,
  messageText,
  publishStatus,
  publishSubmitted,
  serve,
  textPart,
} from './peer.mjs';
import { AGENT_CARD_PATH, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler } from '@a2a-js/sdk/server/express';

function parseArgs(argv) {
  const out = { port: 0, slowTimeout: 30 };
  for (let i = 0; i < argv.length; i += 1) {
    const [flag, inline] = argv[i].split('=', 2);
    const value = inline ?? argv[i + 1];
    if (flag === '--port') out.port = Number(value);
    else if (flag === '--slow-timeout') out.slowTimeout = Number(value);
    else continue;
    if (inline === undefined) i += 1;
  }
  if (!Number.isInteger(out.port) || out.port < 0 || out.port > 65535) {
    throw new Error(`bad --port ${out.port}`);
  }
  if (!Number.isFinite(out.slowTimeout)) out.slowTimeout = 30;
  out.slowTimeout = Math.min(Math.max(out.slowTimeout, 0.1), 30);
  return out;
}

const args = parseArgs(process.argv.slice(2));

// Interface URLs are filled in once the port is known, before READY is printed.
const card = {
  name: 'otel-a2a Node test peer',
  description: '@a2a-js/sdk 1.3.0 peer whose behaviour follows the message text',
  version: '1.0.0',
  supportedInterfaces: [
    { url: '', protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
    { url: '', protocolBinding: 'HTTP+JSON', protocolVersion: '1.0', tenant: '' },
    { url: '', protocolBinding: 'JSONRPC', protocolVersion: '0.3', tenant: '' },
    { url: '', protocolBinding: 'HTTP+JSON', protocolVersion: '0.3', tenant: '' },
  ],
  capabilities: {
    streaming: true,
    pushNotifications: false,
    extensions: [
      {
        uri: HEARTBEAT_URI,
        description: 'Task liveness: an authoritative observation is fresh for this long',
        required: false,
        params: { intervalSeconds: 30 },
      },
    ],
  },
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [
    {
      id: 'behave',
      name: 'Behave',
      description: 'echo / slow / input / fail / reject, chosen by the first word',
      tags: ['test'],
      examples: [],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    },
  ],
};


class BehaviourExecutor {
  // taskId -> { release(outcome), done: Promise } for slow executions waiting for a follow-up
  waiting = new Map();
  // taskId -> contextId, for status events published by cancelTask
  contexts = new Map();

  // Runs the behaviour chosen by `text` on an existing task (the first Task event is published).
  async behave(text, taskId, contextId, bus) {
    const word = (text.split(/\s+/, 1)[0] || '').toLowerCase();
    if (word === 'reject') {
      publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_REJECTED, `rejected: ${text}`);
      return;
    }
    publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_WORKING);
    if (word === 'fail') {
      publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_FAILED, 'failed as asked');
    } else if (word === 'input') {
      publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, 'more input needed');
    } else if (word === 'slow') {
      let release;
      const outcome = new Promise((resolve) => {
        release = resolve;
      });
      const timer = setTimeout(() => release({ kind: 'timeout' }), args.slowTimeout * 1000);
      let finish;
      const done = new Promise((resolve) => {
        finish = resolve;
      });
      this.waiting.set(taskId, { release, done });
      const result = await outcome;
      clearTimeout(timer);
      this.waiting.delete(taskId);
      try {
        if (result.kind === 'timeout') {
          publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_FAILED, 'slow task timed out');
        } else if (result.kind === 'follow-up') {
          // The follow-up's text decides, on this execution's bus (the SDK closes the bus when
          // the first execution returns, so the follow-up's own execution only waits for this).
          await this.behave(result.text, taskId, contextId, bus);
        }
        // 'cancel': cancelTask already published CANCELED.
      } finally {
        finish();
      }
    } else {
      const reply = word === 'echo' ? text.slice(4).trim() : text;
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          append: false,
          lastChunk: true,
          artifact: {
            artifactId: randomUUID(),
            name: 'echo',
            description: '',
            parts: [textPart(`echo: ${reply}`)],
            metadata: undefined,
            extensions: [],
          },
          metadata: undefined,
        }),
      );
      publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED);
    }
  }

  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx;
    const text = messageText(userMessage);
    this.contexts.set(taskId, contextId);
    const waiter = this.waiting.get(taskId);
    if (waiter) {
      // Follow-up to a waiting slow task: hand the text over and wait until it is handled.
      waiter.release({ kind: 'follow-up', text });
      await waiter.done;
      return;
    }
    if (!ctx.task) publishSubmitted(bus, taskId, contextId, userMessage);
    await this.behave(text, taskId, contextId, bus);
  }

  async cancelTask(taskId, bus) {
    const waiter = this.waiting.get(taskId);
    this.waiting.delete(taskId);
    const contextId = this.contexts.get(taskId) ?? '';
    publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_CANCELED, 'canceled on request');
    if (waiter) waiter.release({ kind: 'cancel' });
  }
}

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new BehaviourExecutor());
const compat = { enabled: true };
const app = a2aApp(handler, { cardMaxAge: 300, legacyCompat: compat });
app.use(
  `/compat/${AGENT_CARD_PATH}`,
  agentCardHandler({ agentCardProvider: handler, legacyCompat: compat }),
);
serve(app, args.port, card);
