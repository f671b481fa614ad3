// The official TypeScript MCP SDK client (@modelcontextprotocol/sdk, pinned in package.json)
// against the real gateway over Streamable HTTP: it lists the tools (the SDK compiles every
// outputSchema), gets tool errors with their stable code, and drives a whole read_only session
// with the real Claude Code runner, and a worktree_write + deepseek_explicit session whose
// delegated task runs on a second real Claude Code against a scripted local DeepSeek. Every
// callTool result is validated by the SDK against the tool's outputSchema (callTool throws
// -32602 on a mismatch), errors included.

import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { startGateway, tempDir } from './support.mjs';

const TOOLS = [
  'native_session_continue',
  'native_session_recover',
  'native_session_reply_and_wait',
  'native_session_start',
  'native_session_status',
  'native_session_stop',
];
// A long-polling call may wait up to 50 s on the server; give the SDK more than that.
const CALL = { timeout: 120_000 };

// The formats JSON Schema 2020-12 defines; anything else makes validators warn (issue 12, item 3).
const STANDARD_FORMATS = new Set([
  'date-time', 'date', 'time', 'duration', 'email', 'idn-email', 'hostname', 'idn-hostname',
  'ipv4', 'ipv6', 'uri', 'uri-reference', 'iri', 'iri-reference', 'uuid', 'uri-template',
  'json-pointer', 'relative-json-pointer', 'regex',
]);

async function connect(url, token) {
  const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
  const client = new Client({ name: 'native-gateway-node-interop', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit }));
  return client;
}

/** Calls a tool whose output the SDK validates; asserts a validator was compiled for it. */
async function call(client, name, args) {
  assert.ok(client.getToolOutputValidator(name), `no output validator for ${name}: call listTools first`);
  return client.callTool({ name, arguments: args }, undefined, CALL);
}

function view(result, what) {
  assert.notEqual(result.isError, true, `${what} failed: ${JSON.stringify(result)}`);
  assert.equal(typeof result.structuredContent, 'object', `${what}: no structuredContent`);
  return result.structuredContent;
}

function errorCode(result, what) {
  assert.equal(result.isError, true, `${what} succeeded: ${JSON.stringify(result)}`);
  const error = result.structuredContent?.error;
  assert.equal(typeof error?.code, 'string', `${what}: no structuredContent.error.code: ${JSON.stringify(result)}`);
  assert.ok(error.message, `${what}: error without a message`);
  const text = result.content?.find((c) => c.type === 'text')?.text ?? '';
  assert.ok(text.includes(error.code), `${what}: the text content does not carry the code: ${text}`);
  return error.code;
}

function toolNames(allowed) {
  return allowed.map((t) => (typeof t === 'string' ? t : t.name));
}

function* walk(schema, path = '$') {
  if (schema === null || typeof schema !== 'object') {
    yield [path, schema];
    return;
  }
  yield [path, schema];
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'enum' || key === 'const' || key === 'default' || key === 'examples') continue;
    if (value !== null && typeof value === 'object') yield* walk(value, `${path}.${key}`);
  }
}

/** Waits (status long-poll) until the session has a pending turn or is idle or terminal. */
async function settle(client, v) {
  const deadline = Date.now() + 120_000;
  while (!['waiting_for_gpt', 'idle', 'stopped', 'failed', 'expired'].includes(v.status)) {
    assert.ok(Date.now() < deadline, `session did not settle: ${JSON.stringify(v)}`);
    v = view(
      await call(client, 'native_session_status', {
        native_session_id: v.native_session_id,
        lease_id: v.lease_id,
        wait_seconds: 10,
      }),
      'status',
    );
  }
  return v;
}

describe('TypeScript SDK client', () => {
  let gw;
  let client;

  before(async () => {
    gw = await startGateway();
    client = await connect(gw.url, gw.token);
  });

  after(async () => {
    await client?.close();
    if (gw) await gw.stop();
  });

  test('lists six tools with schemas the SDK accepts', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
    for (const tool of tools) {
      assert.ok(tool.description, `${tool.name}: no description`);
      assert.equal(tool.inputSchema.type, 'object', `${tool.name}: inputSchema`);
      assert.equal(tool.outputSchema?.type, 'object', `${tool.name}: outputSchema`);
      assert.ok(client.getToolOutputValidator(tool.name), `${tool.name}: the SDK compiled no validator`);
      for (const key of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
        assert.equal(typeof tool.annotations?.[key], 'boolean', `${tool.name}: annotation ${key}`);
      }
      for (const [where, schema] of [['inputSchema', tool.inputSchema], ['outputSchema', tool.outputSchema]]) {
        for (const [path, node] of walk(schema)) {
          assert.notEqual(node, true, `${tool.name} ${where} ${path}: boolean schema \`true\``);
          if (node && typeof node === 'object' && typeof node.format === 'string') {
            assert.ok(STANDARD_FORMATS.has(node.format), `${tool.name} ${where} ${path}: non-standard format ${node.format}`);
          }
        }
      }
    }
  });

  test('capability URL works without a header', async () => {
    const c = await connect(gw.capabilityUrl, null);
    try {
      const { tools } = await c.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
    } finally {
      await c.close();
    }
  });

  test('a wrong token is refused', async () => {
    await assert.rejects(connect(gw.url, 'wrong-token'), (err) => {
      assert.equal(err.code, 401, String(err));
      return true;
    });
  });

  test('tool errors reach the client with their stable code', async () => {
    const unknown = await call(client, 'native_session_status', {
      native_session_id: 'ns_does_not_exist',
      lease_id: 'lease_does_not_exist',
      wait_seconds: 0,
    });
    assert.ok(['not_found', 'lease_invalid'].includes(errorCode(unknown, 'status of an unknown session')));

    const relative = await call(client, 'native_session_start', {
      prompt: 'hello',
      working_directory: 'relative/dir',
      idempotency_key: randomUUID(),
    });
    assert.equal(errorCode(relative, 'start in a relative directory'), 'invalid_argument');
  });

  test('an unknown tool is a protocol error', async () => {
    await assert.rejects(client.callTool({ name: 'native_session_explode', arguments: {} }), (err) => {
      assert.equal(typeof err.code, 'number', String(err));
      return true;
    });
  });

  test('a whole read_only session with the real Claude Code runner', async () => {
    const dir = tempDir('gw-node-wd-');
    try {
      const notes = join(dir, 'notes.txt');
      writeFileSync(notes, 'alpha\nneedle here\ngamma\n');
      mkdirSync(join(dir, 'src'));
      writeFileSync(join(dir, 'src', 'lib.rs'), 'fn needle() {}\n');

      // start → a pending prompt turn
      let v = view(
        await call(client, 'native_session_start', {
          prompt: 'Look at notes.txt for me',
          working_directory: dir,
          idempotency_key: randomUUID(),
          capability_profile: 'read_only',
          wait_seconds: 50,
        }),
        'start',
      );
      v = await settle(client, v);
      const session = { native_session_id: v.native_session_id, lease_id: v.lease_id };
      assert.equal(v.status, 'waiting_for_gpt', JSON.stringify(v));
      assert.equal(v.capability_profile, 'read_only');
      assert.equal(v.pending_turn.kind, 'prompt');
      assert.equal(v.pending_turn.prompt, 'Look at notes.txt for me');
      const allowed = toolNames(v.pending_turn.allowed_tools);
      for (const name of ['Read', 'FindFiles', 'SearchText', 'RunCommand']) {
        assert.ok(allowed.includes(name), `${name} not offered in read_only: ${allowed}`);
      }

      // reply with FindFiles and Read → a tool_results turn with receipts
      v = view(
        await call(client, 'native_session_reply_and_wait', {
          ...session,
          turn_id: v.pending_turn.turn_id,
          reply_id: randomUUID(),
          text: 'Looking around.',
          tool_calls: [
            { name: 'FindFiles', arguments: { path: dir } },
            { name: 'Read', arguments: { file_path: notes } },
          ],
        }),
        'reply with tool calls',
      );
      v = await settle(client, v);
      assert.equal(v.status, 'waiting_for_gpt', JSON.stringify(v));
      assert.equal(v.pending_turn.kind, 'tool_results');
      const results = v.pending_turn.tool_results;
      assert.equal(results.length, 2, JSON.stringify(results));
      for (const [i, name] of ['FindFiles', 'Read'].entries()) {
        assert.equal(results[i].call_index, i);
        assert.equal(results[i].name, name);
        assert.equal(results[i].status, 'ok', JSON.stringify(results[i]));
        assert.match(results[i].receipt.action_id, /^act_/);
      }
      assert.ok(results[0].output.includes(notes), results[0].output);
      assert.ok(results[0].output.includes(join(dir, 'src', 'lib.rs')), results[0].output);
      assert.ok(results[1].output.includes('needle here'), results[1].output);
      const sha = createHash('sha256').update(readFileSync(notes)).digest('hex');
      assert.equal(results[1].receipt.sha256, sha);

      // a text-only reply → the runner's turn ends: idle with last_result
      const toolTurn = v.pending_turn.turn_id;
      v = view(
        await call(client, 'native_session_reply_and_wait', {
          ...session,
          turn_id: toolTurn,
          reply_id: randomUUID(),
          text: 'The needle is on line 2.',
        }),
        'final reply',
      );
      v = await settle(client, v);
      assert.equal(v.status, 'idle', JSON.stringify(v));
      assert.equal(v.pending_turn, null);
      assert.equal(v.last_result.turn_id, toolTurn);
      assert.equal(v.last_result.text, 'The needle is on line 2.');

      // stop → stopped
      v = view(
        await call(client, 'native_session_stop', { ...session, request_id: randomUUID(), reason: 'done' }),
        'stop',
      );
      assert.equal(v.status, 'stopped', JSON.stringify(v));
      assert.equal(v.terminal.reason, 'stopped');
      assert.equal(v.current_run.state, 'exited');

      // the stopped session refuses more work, with its code
      const more = await call(client, 'native_session_continue', {
        ...session,
        prompt: 'more',
        idempotency_key: randomUUID(),
        wait_seconds: 0,
      });
      assert.equal(errorCode(more, 'continue after stop'), 'session_terminal');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * A scripted DeepSeek (Anthropic-compatible Messages API on 127.0.0.1): every request is
 * answered with one text-only assistant message, as SSE when asked to stream. Records the model
 * and key of each request.
 */
async function fakeDeepseek(answer) {
  const seen = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url.endsWith('/v1/messages')) {
        res.writeHead(404).end();
        return;
      }
      const request = JSON.parse(body);
      seen.push({ model: request.model, key: req.headers['x-api-key'] });
      const id = `msg_fake_${seen.length}`;
      const message = { id, type: 'message', role: 'assistant', model: request.model };
      if (!request.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({
          ...message, content: [{ type: 'text', text: answer }], stop_reason: 'end_turn',
          stop_sequence: null, usage: { input_tokens: 10, output_tokens: 5 },
        }));
        return;
      }
      const events = [
        ['message_start', { type: 'message_start', message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 1 } } }],
        ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
        ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: answer } }],
        ['content_block_stop', { type: 'content_block_stop', index: 0 }],
        ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5 } }],
        ['message_stop', { type: 'message_stop' }],
      ];
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(events.map(([name, data]) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`).join(''));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}`,
    seen,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** The JSON report a deepseek_subagent_* call returned as its tool result. */
function report(v) {
  const result = v.pending_turn?.tool_results?.[0];
  assert.equal(result?.status, 'ok', JSON.stringify(v));
  return JSON.parse(result.output);
}

describe('TypeScript SDK client, a deepseek_explicit session', () => {
  const KEY = `sk-test-${randomUUID()}`;
  let fake;
  let gw;
  let client;

  before(async () => {
    fake = await fakeDeepseek('Nothing needed changing.');
    gw = await startGateway({
      extraEnv: { CLAUDE_TOOLS_DEEPSEEK_BASE_URL: fake.baseUrl, DEEPSEEK_API_KEY: KEY },
    });
    client = await connect(gw.url, gw.token);
    await client.listTools();
  });

  after(async () => {
    await client?.close();
    if (gw) await gw.stop();
    await fake?.close();
  });

  test('start, delegate on the Pro tier, poll, stop: every answer valid for the SDK', async () => {
    const dir = tempDir('gw-node-ds-');
    try {
      writeFileSync(join(dir, 'README.md'), 'a project\n');
      const git = (...args) => execFileSync('git', args, {
        cwd: dir,
        env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.net', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.net' },
      });
      git('init', '-q');
      git('add', '.');
      git('commit', '-q', '-m', 'init');

      // The start's answer (lease, recovery token) validates: the client is never orphaned.
      let v = view(
        await call(client, 'native_session_start', {
          prompt: 'Delegate a check of the README',
          working_directory: dir,
          idempotency_key: randomUUID(),
          capability_profile: 'worktree_write',
          subagent_policy: 'deepseek_explicit',
          wait_seconds: 50,
        }),
        'start',
      );
      v = await settle(client, v);
      assert.equal(v.status, 'waiting_for_gpt', JSON.stringify(v));
      assert.ok(v.lease_id && v.recovery_token, JSON.stringify(v));
      assert.match(v.deepseek_route, /fable->deepseek-v4-pro/);
      assert.match(v.deepseek_route, /no fallback/);
      assert.ok(!JSON.stringify(v).includes(KEY), 'the key never appears in an answer');
      const session = { native_session_id: v.native_session_id, lease_id: v.lease_id };
      const reply = async (toolCalls, what) => settle(client, view(
        await call(client, 'native_session_reply_and_wait', {
          ...session, turn_id: v.pending_turn.turn_id, reply_id: randomUUID(), tool_calls: toolCalls,
        }),
        what,
      ));

      v = await reply([{ name: 'deepseek_subagent_start', arguments: { task: 'Check the README.', tier: 'fable' } }], 'delegate');
      const { subsession_id: id } = report(v);
      assert.match(id, /^ds_/);
      assert.equal(v.active_deepseek_subsession_id ?? id, id);
      let status = report(v).status;
      for (let round = 0; ['starting', 'running'].includes(status); round++) {
        assert.ok(round < 40, `the sub-session did not end: ${JSON.stringify(v)}`);
        await new Promise((resolve) => setTimeout(resolve, 2000));
        v = await reply([{ name: 'deepseek_subagent_get', arguments: { subsession_id: id } }], 'get');
        status = report(v).status;
      }
      const ended = report(v);
      assert.equal(ended.status, 'succeeded', JSON.stringify(ended));
      assert.match(ended.result_text, /Nothing needed changing/);
      assert.equal(v.deepseek_subsessions.length, 1, JSON.stringify(v));
      assert.equal(v.deepseek_subsessions[0].status, 'succeeded');
      assert.equal(v.active_deepseek_subsession_id, null);

      // The Fable tier reached the Pro model, with the key the gateway added; nothing else.
      assert.ok(fake.seen.length >= 1, 'DeepSeek was asked');
      for (const request of fake.seen) {
        assert.equal(request.model, 'deepseek-v4-pro', JSON.stringify(fake.seen));
        assert.equal(request.key, KEY);
      }

      v = view(await call(client, 'native_session_stop', { ...session, request_id: randomUUID() }), 'stop');
      assert.equal(v.status, 'stopped', JSON.stringify(v));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
