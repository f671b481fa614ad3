// The owner's consent page in a real headless browser: Debian's Chromium (/usr/bin/chromium,
// installed by scripts/test), driven by playwright-core. The page renders with what it must say
// and no CSP violation, a wrong approval code is answered on the page, the right one works once
// and lands on the client's redirect URI with a code, Deny lands there with access_denied, the
// page cannot be framed, and a cross-site form post is refused. A screenshot of the page is kept
// in docs/oauth-consent.png (refreshed with UPDATE_CONSENT_SCREENSHOT=1).

import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { accessSync, constants, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { chromium } from 'playwright-core';

import { approvalCode } from './oauth-support.mjs';
import { NODE_DIR, startGateway, tempDir } from './support.mjs';

const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
// The kept screenshot is rewritten only when asked (UPDATE_CONSENT_SCREENSHOT=1), so a test run
// leaves the checkout clean; every run still takes one.
const KEPT_SCREENSHOT = join(NODE_DIR, '..', '..', 'docs', 'oauth-consent.png');

function chromiumBinary() {
  try {
    accessSync(CHROMIUM, constants.X_OK);
  } catch {
    throw new Error(`Chromium is missing at ${CHROMIUM}: apt-get install chromium (scripts/test does) or set CHROMIUM_BIN`);
  }
  return CHROMIUM;
}

/**
 * A stand-in for the client's side and for another site, on its own port: `/callback` records
 * what the gateway sends back; `/frame` frames the consent page; `/attack` auto-posts a forged
 * decision to the gateway. The client registers `http://127.0.0.1:<port>/callback`; the other
 * site is opened as `http://localhost:<port>` (another site than 127.0.0.1).
 */
async function startClientSite() {
  const landed = [];
  const pages = new Map();
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (url.pathname === '/callback') {
      landed.push(Object.fromEntries(url.searchParams));
      res.writeHead(200, { 'content-type': 'text/plain' }).end('client received the answer');
      return;
    }
    const body = pages.get(url.pathname);
    if (body) {
      res.writeHead(200, { 'content-type': 'text/html' }).end(body);
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = server.address().port;
  return {
    landed,
    pages,
    callback: `http://127.0.0.1:${port}/callback`,
    otherSite: `http://localhost:${port}`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  return { verifier, challenge };
}

describe('consent page in headless Chromium', () => {
  let gw;
  let site;
  let context;
  let profile;
  let clientId;
  const consoleErrors = [];

  before(async () => {
    const executablePath = chromiumBinary();
    gw = await startGateway();
    site = await startClientSite();
    const registered = await fetch(`${new URL(gw.url).origin}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'ChatGPT (test)', redirect_uris: [site.callback] }),
    });
    assert.equal(registered.status, 201);
    clientId = (await registered.json()).client_id;
    profile = tempDir('gw-chromium-');
    context = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      viewport: { width: 720, height: 620 },
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });

  after(async () => {
    await context?.close();
    await site?.close();
    await gw?.stop();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  function authorizeUrl(state) {
    const { challenge } = pkce();
    const url = new URL('/oauth/authorize', new URL(gw.url).origin);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: site.callback,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state,
      resource: gw.url,
    }).toString();
    return url.toString();
  }

  async function openConsent(state) {
    const page = await context.newPage();
    page.on('console', (msg) => {
      if (msg.type() === 'error') consoleErrors.push(msg.text());
    });
    const response = await page.goto(authorizeUrl(state));
    assert.equal(response.status(), 200);
    return page;
  }

  test('renders the client, the redirect host and what it can do, without CSP violations', async () => {
    const page = await openConsent('render');
    assert.equal(await page.title(), 'Allow ChatGPT (test)? · Native Gateway');
    await page.getByRole('heading', { name: 'Allow ChatGPT (test) to use this gateway?' }).waitFor();
    const text = await page.locator('main').innerText();
    assert.match(text, /Answer goes to\s+127\.0\.0\.1/);
    assert.match(text, /start Claude Code sessions on this computer/);
    assert.match(text, /gatewayctl oauth approve/);
    // Labelled controls, reachable by role.
    await page.getByLabel('Approval code').waitFor();
    await page.getByRole('button', { name: 'Approve' }).waitFor();
    await page.getByRole('button', { name: 'Deny' }).waitFor();
    // The inline style applied (allowed by its hash), and nothing was blocked.
    const font = await page.locator('h1').evaluate((h) => getComputedStyle(h).fontSize);
    assert.equal(font, '22.4px');
    assert.deepEqual(consoleErrors, []);
    const shot = await page.screenshot({ path: join(profile, 'consent.png') });
    assert.ok(shot.length > 10_000, 'the screenshot is empty');
    if (process.env.UPDATE_CONSENT_SCREENSHOT === '1') await page.screenshot({ path: KEPT_SCREENSHOT });
    await page.close();
  });

  test('a wrong code is answered on the page; the right one works once', async () => {
    const page = await openConsent('approve-1');
    const code = await approvalCode(gw.stateDir, await page.locator('#page-code').innerText());
    await page.getByLabel('Approval code').fill('AAAA-AAAA');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByRole('alert').waitFor();
    assert.match(await page.getByRole('alert').innerText(), /not valid .* 4 attempts left/);
    assert.equal(site.landed.length, 0);

    await page.getByLabel('Approval code').fill(code);
    await Promise.all([page.waitForURL(`${site.callback}?**`), page.getByRole('button', { name: 'Approve' }).click()]);
    const answer = site.landed.pop();
    assert.equal(answer.state, 'approve-1');
    assert.ok(answer.code?.startsWith('ngw_code_'), JSON.stringify(answer));
    assert.equal(answer.iss, new URL(gw.url).origin);

    // The same code on a second consent page: refused (it named the first page only).
    const again = await openConsent('approve-2');
    await again.getByLabel('Approval code').fill(code);
    await again.getByRole('button', { name: 'Approve' }).click();
    await again.getByRole('alert').waitFor();
    assert.match(await again.getByRole('alert').innerText(), /No approval code was issued for this page/);
    assert.equal(site.landed.length, 0);
    await again.close();
    await page.close();
  });

  test('Deny sends access_denied back to the client', async () => {
    const page = await openConsent('deny-1');
    await Promise.all([page.waitForURL(`${site.callback}?**`), page.getByRole('button', { name: 'Deny' }).click()]);
    const answer = site.landed.pop();
    assert.equal(answer.error, 'access_denied');
    assert.equal(answer.state, 'deny-1');
    assert.equal(answer.code, undefined);
    await page.close();
  });

  test('the page cannot be framed, and a cross-site post is refused', async () => {
    // Framed by another site: the browser refuses to render it (frame-ancestors 'none', DENY).
    site.pages.set('/frame', `<!doctype html><title>frame</title><iframe src="${authorizeUrl('framed')}"></iframe>`);
    const page = await context.newPage();
    await page.goto(`${site.otherSite}/frame`);
    await page.waitForTimeout(1000);
    const framed = page.frames().find((f) => f !== page.mainFrame());
    assert.ok(framed, 'no iframe');
    const rendered = await framed.locator('input[name="approval_code"]').count().catch(() => 0);
    assert.equal(rendered, 0, 'the consent page rendered inside a frame');

    // Another site posts a decision for a real request, with a live approval code (phished):
    // the browser sends its Origin and no SameSite=Strict cookie; the gateway refuses.
    const consent = await fetch(authorizeUrl('forged'));
    const html = await consent.text();
    const field = (name) => html.match(new RegExp(`name="${name}" value="([^"]+)"`))[1];
    // The owner's own page is open too, and the code names it.
    const own = await openConsent('after-attack');
    const code = await approvalCode(gw.stateDir, await own.locator('#page-code').innerText());
    site.pages.set(
      '/attack',
      `<!doctype html><title>attack</title>
       <form id="f" method="post" action="${new URL(gw.url).origin}/oauth/authorize">
       <input name="request_id" value="${field('request_id')}"><input name="csrf" value="${field('csrf')}">
       <input name="decision" value="approve"><input name="approval_code" value="${code}"></form>
       <script>document.getElementById('f').submit()</script>`,
    );
    const refused = page.waitForResponse((r) => r.url().endsWith('/oauth/authorize') && r.request().method() === 'POST');
    await page.goto(`${site.otherSite}/attack`);
    const response = await refused;
    assert.equal(response.status(), 403);
    await page.getByRole('heading', { name: 'Refused' }).waitFor();
    assert.equal(site.landed.length, 0, 'the forged post reached the client');

    // The code was not spent: the owner's own page still takes it.
    await own.getByLabel('Approval code').fill(code);
    await Promise.all([own.waitForURL(`${site.callback}?**`), own.getByRole('button', { name: 'Approve' }).click()]);
    assert.ok(site.landed.pop().code);
    await own.close();
    await page.close();
  });
});
