// The MCP Inspector's CLI mode (@modelcontextprotocol/inspector --cli, v2, pinned in
// package.json), run as a user would: tools/list over Streamable HTTP (bearer header) and over
// stdio (`gateway serve --stdio`), each with `--strict` (the Inspector's tool-schema portability
// check: it exits 6 on an error-severity problem; warnings are only printed), and a tools/call
// that fails, printed with its stable error code (the Inspector exits 5 for a tool result with
// isError). It exits non-zero too when the SDK under it rejects what the gateway sent. Each run
// gets a home of its own, so the Inspector's catalog and storage never land in the user's.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
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

/** The Inspector's exit code for a tools/call whose result has `isError: true`. */
const EXIT_TOOL_IS_ERROR = 5;

async function inspector(args, env) {
  const home = tempDir('gw-inspector-home-');
  try {
    return await run(clientBinary('mcp-inspector'), ['--cli', ...args], {
      env: { ...process.env, HOME: home, ...env },
    });
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

function assertToolList(out, what) {
  assert.equal(out.code, 0, `${what}: inspector exited ${out.code}\n${out.stdout}\n${out.stderr}`);
  const listed = parseJsonOutput(out.stdout, what);
  assert.deepEqual(listed.tools.map((t) => t.name).sort(), TOOLS, what);
  for (const tool of listed.tools) {
    assert.equal(tool.outputSchema?.type, 'object', `${what}: ${tool.name} outputSchema`);
  }
  // The Inspector warns on stderr about schema keywords its validator does not know
  // (e.g. a non-standard `format`); a clean listing prints none. `--strict` made it exit 6 on any
  // error-severity portability problem (checked above); its warnings are advice only.
  assert.doesNotMatch(out.stderr, /unknown format|strict mode/i, `${what}: schema warnings\n${out.stderr}`);
  assert.doesNotMatch(out.stderr, /^Error: tool /m, `${what}: schema portability errors\n${out.stderr}`);
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
      '--strict',
    ]);
    assertToolList(out, 'tools/list over HTTP');
  });

  test('tools/list over stdio (gateway serve --stdio)', async () => {
    const work = tempDir('gw-node-stdio-');
    const state = join(work, 'state');
    mkdirSync(state, { mode: 0o700 });
    try {
      // Inspector v2 does not hand its own environment to a stdio server: the gateway's
      // variables go with -e, and it runs in the temporary directory.
      const out = await inspector([
        '-e', `CLAUDE_TOOLS_STATE_DIR=${state}`,
        '-e', `CLAUDE_BIN=${requiredBinary('CLAUDE_BIN')}`,
        '--cwd', work,
        requiredBinary('GATEWAY_BIN'), 'serve', '--stdio',
        '--method', 'tools/list', '--strict',
      ]);
      assertToolList(out, 'tools/list over stdio');
      // The gateway used the state dir it was given.
      assert.ok(existsSync(join(state, 'auth', 'access-token')), 'the stdio gateway ignored CLAUDE_TOOLS_STATE_DIR');
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
    assert.equal(out.code, EXIT_TOOL_IS_ERROR, `inspector exited ${out.code}\n${out.stdout}\n${out.stderr}`);
    // The error envelope on stderr names why it exited so.
    assert.match(out.stderr, /"code":"tool_is_error"/, out.stderr);
    const result = parseJsonOutput(out.stdout, 'tools/call');
    assert.equal(result.isError, true, JSON.stringify(result));
    assert.equal(result.structuredContent?.error?.code, 'invalid_argument', JSON.stringify(result));
    assert.match(result.content[0].text, /invalid_argument/);
  });
});
