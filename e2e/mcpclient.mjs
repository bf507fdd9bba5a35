// mcpclient.mjs drives examples/mcpserver with the official TypeScript MCP
// SDK (@modelcontextprotocol/sdk, pinned in package.json), for
// mcpclient_test.go. It is not meant to be run by hand.
//
//   node mcpclient.mjs CONFIG
//
// CONFIG is JSON: {"transport": "stdio", "command", "args", "env"} or
// {"transport": "http", "url", "token"}, plus "root" (an allowed workdir)
// and "outside" (a directory outside the roots). With a token, every HTTP
// request carries it (Authorization: Bearer), and a first step checks that
// a client without it, or with another, is turned away. The driver runs its steps in
// order; after each one it prints one JSON line on stdout and waits for a
// line on stdin (the test checks that no process survived) before the
// next step. Errors of the SDK are reported, not thrown: the test decides.
import readline from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

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

async function connect(token = cfg.token) {
  const client = new Client({ name: 'clinvoke-ts-driver', version: '0.0.1' });
  const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
  const transport = cfg.transport === 'stdio'
    ? new StdioClientTransport({ command: cfg.command, args: cfg.args, env: cfg.env, stderr: 'inherit' })
    : new StreamableHTTPClientTransport(new URL(cfg.url), { requestInit });
  await client.connect(transport);
  return { client, transport };
}

if (cfg.token) {
  await step('unauthenticated', async () => {
    const results = {};
    for (const [name, token] of [['noToken', ''], ['wrongToken', 'x'.repeat(40)]]) {
      try {
        const { client: c } = await connect(token);
        await c.close();
        results[name] = { rejected: false };
      } catch (e) {
        results[name] = { rejected: true, error: String(e?.message ?? e), code: e?.code };
      }
    }
    return { results };
  });
}

// call calls the codex tool; onStreaming runs once a progress message
// shows the fake agent streaming, which it does once its whole tree is up.
async function call(client, args, { signal, onStreaming } = {}) {
  let progress = 0;
  let streaming = false;
  try {
    const res = await client.callTool({ name: 'codex', arguments: args }, undefined, {
      signal,
      timeout: 600_000,
      resetTimeoutOnProgress: true,
      onprogress: (p) => {
        progress++;
        if (!streaming && /running: |thinking/.test(p.message ?? '')) {
          streaming = true;
          onStreaming?.();
        }
      },
    });
    return { isError: !!res.isError, out: res.structuredContent ?? null, text: res.content?.[0]?.text ?? '', progress };
  } catch (e) {
    return { rejected: true, error: String(e?.message ?? e), progress };
  }
}

const { client, transport } = await connect();

await step('cancel', async () => {
  const ac = new AbortController();
  return call(client, { prompt: 'cancel me', workdir: cfg.root }, { signal: ac.signal, onStreaming: () => ac.abort('user cancel') });
});

await step('progress', async () => call(client, { prompt: 'report progress', workdir: cfg.root }));

await step('concurrent', async () => {
  const ac = new AbortController();
  const results = await Promise.all([
    call(client, { prompt: 'first', workdir: cfg.root }),
    call(client, { prompt: 'second, cancelled', workdir: cfg.root }, { signal: ac.signal, onStreaming: () => ac.abort('user cancel') }),
    call(client, { prompt: 'third', workdir: cfg.root }),
  ]);
  return { results };
});

await step('failure', async () => call(client, { prompt: 'outside the roots', workdir: cfg.outside }));

await step('bad inputs', async () => {
  const results = {
    noPrompt: await call(client, { workdir: cfg.root }),
    blankPrompt: await call(client, { prompt: '   ', workdir: cfg.root }),
    promptNotString: await call(client, { prompt: 42, workdir: cfg.root }),
    badPermission: await call(client, { prompt: 'x', workdir: cfg.root, permission: 'root' }),
    badSession: await call(client, { prompt: 'x', workdir: cfg.root, session_id: 'latest' }),
  };
  try {
    await client.callTool({ name: 'no_such_tool', arguments: {} });
    results.unknownTool = { rejected: false };
  } catch (e) {
    results.unknownTool = { rejected: true, error: String(e?.message ?? e) };
  }
  // The server still serves.
  results.after = await call(client, { prompt: 'after the bad inputs', workdir: cfg.root });
  return { results };
});

// Last: the client goes away in the middle of a call, without cancelling
// it (stdio: its stdin closes; HTTP: its connections close).
await step('disconnect', async () => {
  const pending = call(client, { prompt: 'left behind', workdir: cfg.root }, { onStreaming: () => { client.close(); } });
  const res = await pending;
  return res;
});

if (cfg.transport !== 'stdio') {
  // The server serves the next client.
  await step('next client', async () => {
    const { client: c2 } = await connect();
    const res = await call(c2, { prompt: 'next client', workdir: cfg.root });
    await c2.close();
    return res;
  });
}
process.exit(0);
