// The seeded incident's worker: @a2a-js/sdk 1.3.0 + express 5 with a durable file task store.
//
//   node worker.mjs --port N --store DIR [--card-version V] [--heartbeat S] [--job-seconds S]
//                   [--card-max-age S] [--forget]
//
// Prints "READY <base_url>" on stdout once listening on 127.0.0.1 (N = 0 picks a free port).
//
//   /.well-known/agent-card.json  static card: ETag + Cache-Control (agentCardHandler), 304;
//                                 streaming: true and the heartbeat extension
//                                 {"uri":"urn:otel-a2a:heartbeat:v1","params":{"intervalSeconds":S}}
//   /a2a/jsonrpc                  v1.0 JSON-RPC
//   /a2a/rest                     v1.0 HTTP+JSON
//
// Tasks live in DIR, one JSON file per task, written atomically on every change. On start the
// worker rehydrates every stored task that is not terminal as TASK_STATE_FAILED: an in-flight
// task cannot survive the restart, and saying so is the precondition the invariant rests on.
// --forget starts with an empty store instead (the "worker forgets tasks" variant: GetTask then
// answers TaskNotFound).
//
// Executor: every new message starts a "long job" task: SUBMITTED, WORKING, then a WORKING status
// update every heartbeat/2 s (a healthy stream keeps frames flowing), COMPLETED with an artifact
// after --job-seconds (a number in the message text, "job 12", overrides it), or CANCELED on
// CancelTask. A follow-up message to a running job is acknowledged with a WORKING status update
// that carries a short agent message.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import {
  a2aApp,
  agentMessage,
  HEARTBEAT_URI,
  messageText,
  now,
  publishStatus,
  publishSubmitted,
  serve,
  textPart,
} from './peer.mjs';
import { TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler } from '@a2a-js/sdk/server';

const TERMINAL = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

function parseArgs(argv) {
  const out = {
    port: 0,
    store: '',
    cardVersion: '1.0.0',
    heartbeat: 30,
    jobSeconds: 600,
    cardMaxAge: 300,
    forget: false,
  };
  const numeric = {
    '--port': 'port',
    '--heartbeat': 'heartbeat',
    '--job-seconds': 'jobSeconds',
    '--card-max-age': 'cardMaxAge',
  };
  for (let i = 0; i < argv.length; i += 1) {
    const [flag, inline] = argv[i].split('=', 2);
    if (flag === '--forget') {
      out.forget = true;
      continue;
    }
    const value = inline ?? argv[i + 1];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag in numeric) out[numeric[flag]] = Number(value);
    else if (flag === '--store') out.store = value;
    else if (flag === '--card-version') out.cardVersion = value;
    else throw new Error(`unknown option ${flag}`);
    if (inline === undefined) i += 1;
  }
  if (!Number.isInteger(out.port) || out.port < 0 || out.port > 65535) {
    throw new Error(`bad --port ${out.port}`);
  }
  if (!out.store) throw new Error('--store DIR is required');
  for (const key of ['heartbeat', 'jobSeconds', 'cardMaxAge']) {
    if (!Number.isFinite(out[key]) || out[key] < 0) throw new Error(`bad value for ${key}`);
  }
  if (out.heartbeat <= 0) throw new Error('--heartbeat must be > 0');
  return out;
}

const args = parseArgs(process.argv.slice(2));
const log = (line) => process.stderr.write(`[worker ${now()}] ${line}\n`);

// ---------------------------------------------------------------------------------------------
// Durable store: one JSON file per task, atomic replace (write + rename), synchronous so that
// concurrent saves of one task can never interleave. Tenancy/ownership is not modelled (one
// unauthenticated user in the demo).
class FileTaskStore {
  constructor(dir) {
    this.dir = dir;
    fs.mkdirSync(dir, { recursive: true });
  }

  file(taskId) {
    return path.join(this.dir, `${encodeURIComponent(taskId)}.json`);
  }

  write(task) {
    const target = this.file(task.id);
    const tmp = `${target}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(task));
    fs.renameSync(tmp, target);
  }

  read(file) {
    try {
      return JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (err) {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    }
  }

  all() {
    return fs
      .readdirSync(this.dir)
      .filter((name) => name.endsWith('.json'))
      .map((name) => this.read(path.join(this.dir, name)))
      .filter((task) => task !== undefined);
  }

  async save(task) {
    this.write(task);
  }

  async load(taskId) {
    return this.read(this.file(taskId));
  }

  async list(params) {
    const { contextId, status, pageSize = 50, includeArtifacts = false } = params;
    let tasks = this.all();
    if (contextId) tasks = tasks.filter((t) => t.contextId === contextId);
    if (status !== undefined && status !== TaskState.TASK_STATE_UNSPECIFIED) {
      tasks = tasks.filter((t) => t.status?.state === status);
    }
    tasks.sort((a, b) => (b.status?.timestamp || '').localeCompare(a.status?.timestamp || ''));
    const page = tasks.slice(0, pageSize).map((t) => (includeArtifacts ? t : { ...t, artifacts: [] }));
    return { tasks: page, nextPageToken: '', pageSize, totalSize: tasks.length };
  }

  // The precondition of the invariant: nothing stays "in flight" across a restart.
  rehydrate() {
    let failed = 0;
    for (const task of this.all()) {
      if (TERMINAL.has(task.status?.state)) continue;
      task.status = {
        state: TaskState.TASK_STATE_FAILED,
        timestamp: now(),
        message: agentMessage(task.id, task.contextId, 'worker restarted: the in-flight job was lost'),
      };
      this.write(task);
      failed += 1;
    }
    return failed;
  }

  clear() {
    for (const name of fs.readdirSync(this.dir)) {
      if (name.endsWith('.json')) fs.rmSync(path.join(this.dir, name), { force: true });
    }
  }
}

// ---------------------------------------------------------------------------------------------
class LongJobExecutor {
  // taskId -> { contextId, cancel() }
  jobs = new Map();

  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx;
    const text = messageText(userMessage);
    if (this.jobs.has(taskId)) {
      // A follow-up to the running job: acknowledge on the task's bus; the job goes on.
      publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_WORKING, `noted: ${text.slice(0, 80)}`);
      log(`follow-up on ${taskId}`);
      return;
    }
    if (!ctx.task) publishSubmitted(bus, taskId, contextId, userMessage);
    const asked = Number((text.match(/(\d+(?:\.\d+)?)/) ?? [])[1]);
    const seconds = Number.isFinite(asked) && asked > 0 ? asked : args.jobSeconds;
    let cancel;
    const cancelled = new Promise((resolve) => {
      cancel = resolve;
    });
    this.jobs.set(taskId, { contextId, cancel });
    log(`job ${taskId} started (${seconds} s)`);
    publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_WORKING);
    const tick = setInterval(
      () => publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_WORKING),
      Math.max(50, (args.heartbeat * 1000) / 2),
    );
    let timer;
    const finished = new Promise((resolve) => {
      timer = setTimeout(() => resolve('done'), seconds * 1000);
    });
    const outcome = await Promise.race([finished, cancelled]);
    clearInterval(tick);
    clearTimeout(timer);
    this.jobs.delete(taskId);
    if (outcome === 'done') {
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          append: false,
          lastChunk: true,
          artifact: {
            artifactId: randomUUID(),
            name: 'result',
            description: '',
            parts: [textPart(`long job done after ${seconds} s`)],
            metadata: undefined,
            extensions: [],
          },
          metadata: undefined,
        }),
      );
      publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED);
      log(`job ${taskId} completed`);
    } else {
      log(`job ${taskId} canceled`);
    }
  }

  async cancelTask(taskId, bus) {
    const job = this.jobs.get(taskId);
    const contextId = job?.contextId ?? '';
    publishStatus(bus, taskId, contextId, TaskState.TASK_STATE_CANCELED, 'canceled on request');
    if (job) job.cancel('canceled');
  }
}

// ---------------------------------------------------------------------------------------------
const store = new FileTaskStore(path.resolve(args.store));
if (args.forget) {
  store.clear();
  log('started with an empty store (--forget)');
} else {
  const failed = store.rehydrate();
  if (failed) log(`rehydrated ${failed} in-flight task(s) as TASK_STATE_FAILED`);
}

// Interface URLs are filled in once the port is known, before READY is printed.
const card = {
  name: 'otel-a2a demo worker',
  description: 'Runs long jobs; keeps its tasks in a durable file store',
  version: args.cardVersion,
  supportedInterfaces: [
    { url: '', protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
    { url: '', protocolBinding: 'HTTP+JSON', protocolVersion: '1.0', tenant: '' },
  ],
  capabilities: {
    streaming: true,
    pushNotifications: false,
    extensions: [
      {
        uri: HEARTBEAT_URI,
        description: 'Task liveness: an authoritative observation is fresh for this long',
        required: false,
        params: { intervalSeconds: args.heartbeat },
      },
    ],
  },
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [
    {
      id: 'long-job',
      name: 'Long job',
      description: 'A job that works for a while (seconds from the message text)',
      tags: ['demo'],
      examples: ['job 20'],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    },
  ],
};

// WORKING keeps the task's bus alive when a follow-up's execution returns, so the job's own
// stream (and its heartbeat frames) goes on until the job ends.
const handler = new DefaultRequestHandler(
  card,
  store,
  new LongJobExecutor(),
  undefined,
  undefined,
  undefined,
  undefined,
  undefined,
  {
    keepBusAliveStates: [
      TaskState.TASK_STATE_SUBMITTED,
      TaskState.TASK_STATE_WORKING,
      TaskState.TASK_STATE_INPUT_REQUIRED,
      TaskState.TASK_STATE_AUTH_REQUIRED,
    ],
  },
);
serve(a2aApp(handler, { cardMaxAge: args.cardMaxAge }), args.port, card);
