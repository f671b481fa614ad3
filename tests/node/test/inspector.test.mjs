// The MCP Inspector's CLI mode (@modelcontextprotocol/inspector --cli, pinned in package.json),
// run as a user would: tools/list over Streamable HTTP (bearer header) and over stdio
// (`gateway serve --stdio`), and a tools/call that fails, printed with its stable error code.
// The Inspector exits non-zero when the SDK under it rejects what the gateway sent.

import assert from 'node:assert/strict';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { clientBinary, parseJsonOutput, requiredBinary, run, startGateway, tempDir } from './support.mjs';

const TOOLS = [
  'native_session_continue',
  'native_session_recover',
  'native_session_reply_and_wait',
  'native_session_start',
  'native_session_status',
  'native_session_stop',
];

function inspector(args, env) {
  return run(clientBinary('mcp-inspector'), ['--cli', ...args], { env: { ...process.env, ...env } });
}

function assertToolList(out, what) {
  assert.equal(out.code, 0, `${what}: inspector exited ${out.code}\n${out.stdout}\n${out.stderr}`);
  const listed = parseJsonOutput(out.stdout, what);
  assert.deepEqual(listed.tools.map((t) => t.name).sort(), TOOLS, what);
  for (const tool of listed.tools) {
    assert.equal(tool.outputSchema?.type, 'object', `${what}: ${tool.name} outputSchema`);
  }
  // The Inspector warns on stderr about schema keywords its validator does not know
  // (e.g. a non-standard `format`); a clean listing prints none.
  assert.doesNotMatch(out.stderr, /unknown format|strict mode/i, `${what}: schema warnings\n${out.stderr}`);
}

describe('MCP Inspector CLI', () => {
  let gw;

  before(async () => {
    gw = await startGateway();
  });

  after(async () => {
    if (gw) await gw.stop();
  });

  test('tools/list over Streamable HTTP', async () => {
    const out = await inspector([
      gw.url,
      '--transport', 'http',
      '--header', `Authorization: Bearer ${gw.token}`,
      '--method', 'tools/list',
    ]);
    assertToolList(out, 'tools/list over HTTP');
  });

  test('tools/list over stdio (gateway serve --stdio)', async () => {
    const work = tempDir('gw-node-stdio-');
    const state = join(work, 'state');
    mkdirSync(state, { mode: 0o700 });
    try {
      const out = await inspector(
        [requiredBinary('GATEWAY_BIN'), 'serve', '--stdio', '--method', 'tools/list'],
        { CLAUDE_TOOLS_STATE_DIR: state, CLAUDE_BIN: requiredBinary('CLAUDE_BIN') },
      );
      assertToolList(out, 'tools/list over stdio');
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  test('a failing tools/call is shown with its stable code', async () => {
    const out = await inspector([
      gw.url,
      '--transport', 'http',
      '--header', `Authorization: Bearer ${gw.token}`,
      '--method', 'tools/call',
      '--tool-name', 'native_session_start',
      '--tool-arg', 'prompt=hello',
      '--tool-arg', 'working_directory=relative/dir',
      '--tool-arg', 'idempotency_key=inspector-1',
    ]);
    assert.equal(out.code, 0, `inspector exited ${out.code}\n${out.stdout}\n${out.stderr}`);
    const result = parseJsonOutput(out.stdout, 'tools/call');
    assert.equal(result.isError, true, JSON.stringify(result));
    assert.equal(result.structuredContent?.error?.code, 'invalid_argument', JSON.stringify(result));
    assert.match(result.content[0].text, /invalid_argument/);
  });
});
