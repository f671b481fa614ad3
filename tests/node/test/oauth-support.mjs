// Shared pieces of the OAuth tests: `gatewayctl` (built beside the gateway, or GATEWAYCTL_BIN),
// the owner's approval code from `gatewayctl oauth approve`, and the consent form driven over
// plain HTTP the way a browser submits it (GET the page and its CSRF cookie, POST the decision).

import assert from 'node:assert/strict';
import { accessSync, constants } from 'node:fs';
import { dirname, join } from 'node:path';

import { requiredBinary, run } from './support.mjs';

/** The gatewayctl binary: GATEWAYCTL_BIN, else the one built beside GATEWAY_BIN. */
export function gatewayctlBinary() {
  const path = process.env.GATEWAYCTL_BIN || join(dirname(requiredBinary('GATEWAY_BIN')), 'gatewayctl');
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`gatewayctl is missing at ${path}: build it (cargo build -p gatewayctl; scripts/test does) or set GATEWAYCTL_BIN`);
  }
  return path;
}

/** `gatewayctl --state-dir <dir> --json <args…>`: its JSON output (a failure throws). */
export async function gatewayctl(stateDir, args) {
  const { code, stdout, stderr } = await run(gatewayctlBinary(), ['--state-dir', stateDir, '--json', ...args]);
  assert.equal(code, 0, `gatewayctl ${args.join(' ')} failed (${code}): ${stderr}`);
  return JSON.parse(stdout);
}

/** A fresh approval code for the consent page with this page code, as the owner gets it. */
export async function approvalCode(stateDir, page) {
  const answer = await gatewayctl(stateDir, ['oauth', 'approve', page]);
  assert.equal(answer.ok, true, JSON.stringify(answer));
  assert.match(answer.approval_code, /^[A-Z2-9]{4}-[A-Z2-9]{4}$/);
  assert.equal(answer.page_code, page);
  return answer.approval_code;
}

/** The page code a consent page shows (`abcd-2345`): the owner names it to `oauth approve`. */
export function pageCode(html) {
  const match = html.match(/<strong id="page-code">([^<]+)<\/strong>/);
  assert.ok(match, 'no page code on the consent page');
  return match[1];
}

function hidden(html, name) {
  const match = html.match(new RegExp(`name="${name}" value="([^"]+)"`));
  assert.ok(match, `no hidden ${name} in the consent page`);
  return match[1];
}

/**
 * Opens the consent page at `authorizationUrl` and submits `decision` with `code` (or, given a
 * function, the code it resolves to once the page is open); resolves to the
 * URL the gateway redirected to (the client's redirect URI with `code` or `error`).
 */
export async function consentOverHttp(authorizationUrl, decision, code) {
  const page = await fetch(authorizationUrl, { redirect: 'manual' });
  assert.equal(page.status, 200, `the consent page: HTTP ${page.status}`);
  const cookie = page.headers.get('set-cookie')?.split(';')[0];
  assert.ok(cookie, 'the consent page set no CSRF cookie');
  const html = await page.text();
  // A code approves only the page it names: the owner asks for it now (a function of the page
  // code).
  if (typeof code === 'function') code = await code(pageCode(html));
  const form = new URLSearchParams({
    request_id: hidden(html, 'request_id'),
    csrf: hidden(html, 'csrf'),
    decision,
    approval_code: code ?? '',
  });
  const origin = new URL(authorizationUrl).origin;
  const answer = await fetch(new URL('/oauth/authorize', authorizationUrl), {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, origin },
    body: form,
  });
  assert.equal(answer.status, 303, `the decision: HTTP ${answer.status}: ${await answer.text()}`);
  return new URL(answer.headers.get('location'));
}
