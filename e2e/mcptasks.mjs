// mcptasks.mjs drives the MCP tasks of examples/mcpserver with the official
// TypeScript SDK's client.experimental.tasks (@modelcontextprotocol/sdk,
// pinned in package.json), for tasks_test.go. It is not meant to be run
// by hand.
//
//   node mcptasks.mjs CONFIG
//
// CONFIG is JSON: {"url", "token", "other", "root"}: the server's URL, the
// bearer token of the client, the token of another identity, and an
// allowed workdir. As mcpclient.mjs does, the driver prints one JSON line
// per step on stdout and waits for a line on stdin before the next step.
import readline from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const cfg = JSON.parse(process.argv[2]);
const input = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

async function step(name, fn) {
  let report;
  try {
    report = { step: name, ...(await fn()) };
  } catch (e) {
    report = { step: name, driverError: String(e?.stack ?? e) };
  }
  process.stdout.write(JSON.stringify(report) + '\n');
  const next = await input.next();
  if (next.done) process.exit(0);
}

// --- the snippet of docs/serving.md ---
async function connect(url, token) {
  const client = new Client({ name: 'clinvoke-tasks-driver', version: '0.0.1' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

// runTask calls the codex tool as a task and follows it to its end:
// taskCreated at once, taskStatus at each poll, then result (or error).
async function runTask(client, args, onMessage) {
  const stream = client.experimental.tasks.callToolStream(
    { name: 'codex', arguments: args },
    undefined,
    { task: { ttl: 60 * 60 * 1000 } },
  );
  for await (const message of stream) {
    if (await onMessage(message)) break; // stop following; the task goes on
  }
}
// --- end of the snippet ---

const t0 = Date.now();
function record(m) {
  return {
    type: m.type,
    ms: Date.now() - t0,
    taskId: m.task?.taskId,
    status: m.task?.status,
    statusMessage: m.task?.statusMessage,
    pollInterval: m.task?.pollInterval,
    isError: m.result?.isError,
    out: m.result?.structuredContent,
    error: m.error ? String(m.error?.message ?? m.error) : undefined,
  };
}

async function refused(fn) {
  try {
    await fn();
    return { refused: false };
  } catch (e) {
    return { refused: true, code: e?.code, error: String(e?.message ?? e) };
  }
}

const client = await connect(cfg.url, cfg.token);

await step('task', async () => {
  const messages = [];
  const start = Date.now();
  await runTask(client, { prompt: 'as a task', workdir: cfg.root }, (m) => {
    messages.push({ ...record(m), ms: Date.now() - start });
  });
  const plain = await client.callTool({ name: 'codex', arguments: { prompt: 'as a task', workdir: cfg.root } }, undefined, { timeout: 600_000 });
  return { messages, plain: { isError: !!plain.isError, out: plain.structuredContent } };
});

await step('cancel', async () => {
  let taskId, cancelled;
  await runTask(client, { prompt: 'cancel this task', workdir: cfg.root }, async (m) => {
    if (m.type === 'taskCreated') taskId = m.task.taskId;
    if (m.type === 'taskStatus' && /running: |thinking|writing/.test(m.task.statusMessage ?? '')) {
      cancelled = await client.experimental.tasks.cancelTask(taskId);
      return true;
    }
  });
  const after = await client.experimental.tasks.getTask(taskId);
  const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
  const again = await refused(() => client.experimental.tasks.cancelTask(taskId));
  return { taskId, cancelled, after, result: { isError: !!result.isError, out: result.structuredContent }, again };
});

await step('reconnect', async () => {
  let taskId;
  await runTask(client, { prompt: 'outlive the connection', workdir: cfg.root }, (m) => {
    taskId = m.task?.taskId;
    return m.type === 'taskCreated';
  });
  await client.close(); // the connection that created the task goes away
  const next = await connect(cfg.url, cfg.token);
  const result = await next.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
  const listed = (await next.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);
  await next.close();
  return { taskId, listed, result: { isError: !!result.isError, out: result.structuredContent } };
});

let last; // the owner's connection, kept for the last steps

await step('other identity', async () => {
  const owner = await connect(cfg.url, cfg.token);
  const other = await connect(cfg.url, cfg.other);
  let taskId;
  await runTask(owner, { prompt: 'mine alone', workdir: cfg.root }, (m) => {
    taskId = m.task?.taskId;
    return m.type === 'taskCreated';
  });
  const results = {
    get: await refused(() => other.experimental.tasks.getTask(taskId)),
    result: await refused(() => other.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)),
    cancel: await refused(() => other.experimental.tasks.cancelTask(taskId)),
    missing: await refused(() => other.experimental.tasks.getTask('N'.repeat(26))),
    listed: (await other.experimental.tasks.listTasks()).tasks.length,
  };
  const result = await owner.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
  results.owner = { isError: !!result.isError, out: result.structuredContent };
  last = owner;
  await other.close();
  return { taskId, results };
});

// A task nobody asks about: the server cancels it after its abandonment
// bound (the test waits for that in the transcript), then says why.
let abandoned;
await step('abandon', async () => {
  await runTask(last, { prompt: 'abandon me', workdir: cfg.root }, (m) => {
    abandoned = m.task?.taskId;
    return m.type === 'taskCreated';
  });
  return { taskId: abandoned };
});

await step('abandoned', async () => {
  const task = await last.experimental.tasks.getTask(abandoned);
  await last.close();
  return { taskId: abandoned, after: task };
});

process.exit(0);
