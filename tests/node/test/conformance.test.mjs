// The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json):
// the server scenarios that apply to a tools-only server, each run against a real gateway and
// required to pass every check. README.md in this folder lists the scenarios that do not apply
// and why. The suite sends no Authorization header, so it is pointed at the capability URL
// (token in the path), the way ChatGPT connects.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { clientBinary, run, startGateway, tempDir } from './support.mjs';

export const APPLICABLE_SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'];

/** The server scenarios README.md explains as not applicable to a tools-only server. */
const NOT_APPLICABLE_SCENARIOS = [
  'tools-call-simple-text', 'tools-call-image', 'tools-call-audio', 'tools-call-embedded-resource',
  'tools-call-mixed-content', 'tools-call-error', 'tools-call-with-progress', 'tools-call-sampling',
  'tools-call-elicitation', 'json-schema-2020-12', 'elicitation-sep1034-defaults',
  'elicitation-sep1330-enums', 'tools-call-with-logging', 'logging-set-level', 'completion-complete',
  'resources-list', 'resources-read-text', 'resources-read-binary', 'resources-templates-read',
  'resources-subscribe', 'resources-unsubscribe', 'prompts-list', 'prompts-get-simple',
  'prompts-get-with-args', 'prompts-get-embedded-resource', 'prompts-get-with-image',
  'server-sse-polling', 'server-sse-multiple-streams',
];

/** The server scenarios `conformance list` names (the `  - name [versions]` lines of its server section). */
function listedServerScenarios(text) {
  const section = text.split(/^Client scenarios/m)[0];
  return [...section.matchAll(/^\s*- (\S+)/gm)].map((m) => m[1]);
}

/** Every checks.json the suite wrote under `dir` (one per scenario run), flattened. */
function readChecks(dir) {
  const checks = [];
  const visit = (d) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) visit(path);
      else if (entry.name === 'checks.json') checks.push(...JSON.parse(readFileSync(path, 'utf8')));
    }
  };
  visit(dir);
  return checks;
}

describe('MCP conformance suite (server scenarios for a tools-only server)', () => {
  let gw;

  before(async () => {
    gw = await startGateway();
  });

  after(async () => {
    if (gw) await gw.stop();
  });

  test('every server scenario of the pinned suite is run or explained', async () => {
    const out = await run(clientBinary('conformance'), ['list']);
    assert.equal(out.code, 0, `conformance list exited ${out.code}\n${out.stderr}`);
    const listed = listedServerScenarios(out.stdout);
    assert.ok(listed.length > 0, `no server scenarios in:\n${out.stdout}`);
    // A new release's new scenario must be looked at: run it, or say in README.md why not.
    assert.deepEqual(
      [...listed].sort(),
      [...APPLICABLE_SCENARIOS, ...NOT_APPLICABLE_SCENARIOS].sort(),
      'server scenarios of the pinned conformance suite',
    );
  });

  for (const scenario of APPLICABLE_SCENARIOS) {
    test(scenario, async () => {
      const out = tempDir(`gw-conformance-${scenario}-`);
      try {
        const result = await run(clientBinary('conformance'), [
          'server',
          '--url', gw.capabilityUrl,
          '--scenario', scenario,
          '--output-dir', out,
        ]);
        const log = `${result.stdout}\n${result.stderr}`;
        const checks = readChecks(out);
        assert.ok(checks.length > 0, `${scenario}: the suite recorded no checks\n${log}`);
        const failed = checks.filter((c) => c.status !== 'SUCCESS');
        assert.deepEqual(
          failed.map((c) => `${c.id}: ${c.status} ${c.errorMessage ?? ''}`),
          [],
          `${scenario}: checks did not pass\n${log}`,
        );
        assert.equal(result.code, 0, `${scenario}: conformance exited ${result.code}\n${log}`);
      } finally {
        rmSync(out, { recursive: true, force: true });
      }
    });
  }
});
