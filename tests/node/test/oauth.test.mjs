// The OAuth flow end to end with the official TypeScript SDK's client-side OAuth support
// (@modelcontextprotocol/sdk: `auth`, an OAuthClientProvider, StreamableHTTPClientTransport): the
// SDK discovers the resource and authorization-server metadata from the 401 challenge, registers
// itself (RFC 7591), sends the owner through the consent page (approved here with the code from
// `gatewayctl oauth approve`), exchanges the code with PKCE, calls the gateway's tools with the
// access token, refreshes it when it expired (rotation), and is refused after `gatewayctl oauth
// revoke`, which sends it back to the authorization step.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { approvalCode, consentOverHttp, gatewayctl } from './oauth-support.mjs';
import { startGateway } from './support.mjs';

const REDIRECT = 'http://127.0.0.1:9/oauth/callback';
// Short-lived access tokens so that the test sees a refresh.
const ACCESS_TTL_SECONDS = 3;

/** An in-memory OAuthClientProvider whose "browser" is the consent form driven over HTTP. */
class OwnerApprovingProvider {
  constructor(stateDir) {
    this.stateDir = stateDir;
    this.client = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.tokenHistory = [];
    this.authorizations = [];
    this.approve = true;
    this.code = undefined;
  }
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return {
      client_name: 'Node SDK OAuth test',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
    this.tokenHistory.push(tokens);
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  invalidateCredentials(scope) {
    this.invalidated = [...(this.invalidated ?? []), scope];
    if (scope === 'all' || scope === 'tokens') this.saved = undefined;
    if (scope === 'all' || scope === 'client') this.client = undefined;
    if (scope === 'all' || scope === 'verifier') this.verifier = undefined;
  }
  async redirectToAuthorization(url) {
    this.authorizations.push(url);
    if (!this.approve) return; // the owner is away: nothing happens
    const landed = await consentOverHttp(url, 'approve', (page) => approvalCode(this.stateDir, page));
    assert.equal(landed.origin + landed.pathname, REDIRECT);
    assert.equal(landed.searchParams.get('state'), url.searchParams.get('state'));
    this.code = landed.searchParams.get('code');
  }
}

async function connect(url, provider) {
  const client = new Client({ name: 'native-gateway-oauth-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await client.connect(transport);
  return { client, transport };
}

describe('OAuth with the official TypeScript SDK client', () => {
  let gw;
  before(async () => {
    gw = await startGateway({
      extraArgs: ['--auth', 'oauth'],
      extraEnv: { CLAUDE_TOOLS_OAUTH_ACCESS_TOKEN_TTL_SECONDS: String(ACCESS_TTL_SECONDS) },
    });
  });
  after(async () => {
    await gw?.stop();
  });

  test('register, authorize, call tools, refresh, revoke', async () => {
    const provider = new OwnerApprovingProvider(gw.stateDir);

    // First contact: 401 → discovery → registration → the consent page → back with a code.
    await assert.rejects(connect(gw.url, provider), UnauthorizedError);
    assert.ok(provider.client?.client_id?.startsWith('ngc_'), 'the SDK did not register');
    assert.equal(provider.authorizations.length, 1);
    const authorizationUrl = provider.authorizations[0];
    assert.equal(authorizationUrl.searchParams.get('code_challenge_method'), 'S256');
    assert.equal(authorizationUrl.searchParams.get('resource'), `${gw.url}`);
    assert.ok(provider.code?.startsWith('ngw_code_'));

    // The SDK exchanges the code (PKCE) and then connects with the access token.
    const pending = new StreamableHTTPClientTransport(new URL(gw.url), { authProvider: provider });
    await pending.finishAuth(provider.code);
    assert.equal(provider.tokenHistory.length, 1);
    const first = provider.saved;
    assert.equal(first.token_type, 'Bearer');
    assert.equal(first.expires_in, ACCESS_TTL_SECONDS);
    assert.ok(first.access_token.startsWith('ngw_at_') && first.refresh_token.startsWith('ngw_rt_'));

    const { client, transport } = await connect(gw.url, provider);
    const { tools } = await client.listTools();
    assert.equal(tools.length, 6);
    const status = await client.callTool({ name: 'native_session_status', arguments: { native_session_id: 'ns_00000000000000000000000000000000', lease_id: 'lease_unknown' } });
    assert.equal(status.isError, true);
    assert.equal(status.structuredContent?.error?.code, 'not_found', JSON.stringify(status));

    // The static token is refused in --auth oauth.
    const stat = await fetch(gw.url, { method: 'POST', headers: { authorization: `Bearer ${gw.token}` } });
    assert.equal(stat.status, 401);

    // The access token expires: the SDK refreshes on the 401 and retries; the refresh token rotates.
    await new Promise((resolve) => setTimeout(resolve, (ACCESS_TTL_SECONDS + 1) * 1000));
    const again = await client.listTools();
    assert.equal(again.tools.length, 6);
    assert.equal(provider.tokenHistory.length, 2, 'the SDK did not refresh');
    assert.notEqual(provider.saved.access_token, first.access_token);
    assert.notEqual(provider.saved.refresh_token, first.refresh_token);
    assert.equal(provider.authorizations.length, 1, 'a refresh must not need the owner again');

    // The owner revokes the grant: the next call is refused and the SDK is sent back to the
    // authorization step (its refresh is refused too); nobody approves this time.
    const { grants } = await gatewayctl(gw.stateDir, ['oauth', 'grants']);
    assert.equal(grants.length, 1);
    assert.equal(grants[0].client_name, 'Node SDK OAuth test');
    assert.ok(grants[0].refreshed_at, 'the grant does not show the refresh');
    const revoked = await gatewayctl(gw.stateDir, ['oauth', 'revoke', grants[0].grant_id]);
    assert.deepEqual(revoked, { ok: true, revoked: 'grant', id: grants[0].grant_id });
    provider.approve = false;
    await assert.rejects(client.listTools(), UnauthorizedError);
    assert.deepEqual(provider.invalidated, ['tokens'], 'the refresh was not refused with invalid_grant');
    assert.equal(provider.authorizations.length, 2, 'the SDK was not sent back to authorize');
    const after = await gatewayctl(gw.stateDir, ['oauth', 'grants']);
    assert.ok(after.grants[0].revoked_at);
    assert.equal(after.grants[0].revoked_reason, 'revoked by the owner');
    await transport.close();
  });
});
