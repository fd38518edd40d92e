/**
 * The ctl-mcp server as an MCP client sees it: the official `Client` over `StdioClientTransport`
 * spawns the compiled server (build/mcp/main.js) against a real gateway on SQLite and a local 402
 * merchant. Tools and their schemas, a paid call, refusals with their PROTOCOL.md §9 code, a
 * paused session the owner must approve, binary bodies, idempotent retries, bad configuration.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { call, createSession, useGatewayAndMerchant } from '../gateway/helpers.js';

const SERVER = fileURLToPath(new URL('../../mcp/main.js', import.meta.url));
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff, 0xfe]);
const PRICES: Record<string, string> = { '/report': '250', '/big': '5000' };

const env = useGatewayAndMerchant(test, { amount: (path) => PRICES[path] ?? '100' });
let files: Server;
let filesUrl = '';
const clients: Client[] = [];

type Result = { isError?: boolean; content: { type: string; text: string }[]; structuredContent?: any };

async function connect(env: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'ctl-mcp-test', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [SERVER], env, stderr: 'pipe' }));
  clients.push(client);
  return client;
}

async function agentFor(token: string) {
  const client = await connect({ CTL_GATEWAY_URL: env.gw.url, CTL_SESSION_TOKEN: token });
  return (name: string, args: Record<string, unknown> = {}) =>
    client.callTool({ name, arguments: args }) as Promise<Result>;
}

async function ownerReceipts(sessionId: string) {
  return (await call(env.gw.url, 'GET', `/sessions/${sessionId}/receipts`, { key: env.gw.ownerKey })).body.receipts as {
    receiptId: string;
    amount: { amountMinor: string; currency: string };
  }[];
}

test.before(async () => {
  files = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'image/png' });
    res.end(PNG);
  });
  await new Promise<void>((r) => files.listen(0, '127.0.0.1', r));
  filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
});
test.after(async () => {
  for (const c of clients) await c.close();
  await new Promise((r) => files.close(r));
});

test('the five tools are listed with input schemas an LLM can fill in', async () => {
  const s = await createSession(env.gw);
  const client = await connect({ CTL_GATEWAY_URL: env.gw.url, CTL_SESSION_TOKEN: s.sessionToken });
  const { tools } = await client.listTools();
  assert.equal(tools.map((t) => t.name).sort(), [
    'check_log',
    'delegate_budget',
    'list_receipts',
    'paid_fetch',
    'session_status',
  ]);
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const t of tools) {
    assert.ok((t.description ?? '').length > 60, `${t.name} has a description`);
    assert.is(t.inputSchema.type, 'object');
    assert.is((t.outputSchema as { type?: string } | undefined)?.type, 'object', `${t.name} declares its output`);
  }
  const fetchInput = byName.paid_fetch!.inputSchema as { properties: Record<string, any>; required?: string[] };
  assert.equal(Object.keys(fetchInput.properties).sort(), [
    'body',
    'bodyEncoding',
    'headers',
    'idempotencyKey',
    'maxBodyBytes',
    'method',
    'purpose',
    'url',
  ]);
  assert.equal(
    [fetchInput.properties.maxBodyBytes.minimum, fetchInput.properties.maxBodyBytes.maximum],
    [1, 1_048_576],
  );
  assert.equal(fetchInput.required, ['url']);
  assert.is(fetchInput.properties.url.type, 'string');
  assert.is(fetchInput.properties.url.format, 'uri');
  assert.equal(fetchInput.properties.method.enum, ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
  assert.equal(fetchInput.properties.bodyEncoding.enum, ['text', 'base64']);
  assert.match(fetchInput.properties.purpose.description, /<domain>:<kind>/);
  const fetchOutput = byName.paid_fetch!.outputSchema as { properties: Record<string, any> };
  assert.equal(fetchOutput.properties.outcome.enum, ['response', 'paused', 'refused', 'failed']);
  assert.ok(
    fetchOutput.properties.receiptId && fetchOutput.properties.amountPaid && fetchOutput.properties.ownerAction,
  );
  const receiptsInput = byName.list_receipts!.inputSchema as { properties: Record<string, any> };
  assert.is(receiptsInput.properties.limit.maximum, 500);
  assert.equal(Object.keys((byName.session_status!.inputSchema as { properties?: object }).properties ?? {}), []);
  assert.is(byName.session_status!.annotations?.readOnlyHint, true);
});

test('a paid call: the merchant answer, the receipt id and the amount paid; status and receipts follow', async () => {
  const s = await createSession(env.gw);
  const tool = await agentFor(s.sessionToken);
  const paidBefore = env.merchant.paid.length;
  const r = await tool('paid_fetch', {
    url: `${env.merchant.url}/report`,
    method: 'POST',
    body: '{"q":"tides"}',
    headers: { 'content-type': 'application/json' },
    purpose: 'api:search',
  });
  assert.not.ok(r.isError, JSON.stringify(r));
  const out = r.structuredContent;
  assert.is(out.outcome, 'response');
  assert.is(out.status, 200);
  assert.is(out.bodyEncoding, 'text');
  const body = JSON.parse(out.body);
  assert.is(body.paid, true);
  assert.is(body.body, '{"q":"tides"}', 'the body reached the merchant');
  assert.is(out.headers['content-type'], 'application/json');
  assert.match(out.receiptId, /^rcpt_/);
  assert.equal(out.amountPaid, { amountMinor: '250', currency: 'USD' });
  assert.is(out.sessionId, s.sessionId);
  assert.is(env.merchant.paid.length, paidBefore + 1);
  // The receipt is the gateway's own record, not something the server made up.
  const receipts = await ownerReceipts(s.sessionId);
  assert.equal(
    receipts.map((x) => x.receiptId),
    [out.receiptId],
  );
  assert.equal(receipts[0]!.amount, out.amountPaid);
  assert.equal(JSON.parse(r.content.at(-1)!.text), out, 'the same JSON as text for clients without structured content');

  const free = await tool('paid_fetch', { url: `${env.merchant.url}/free` });
  assert.is(free.structuredContent.outcome, 'response');
  assert.is(free.structuredContent.receiptId, undefined);
  assert.is(free.structuredContent.amountPaid, undefined);

  const status = (await tool('session_status')).structuredContent;
  assert.is(status.sessionId, s.sessionId);
  assert.is(status.state, 'active');
  assert.is(status.currency, 'USD');
  assert.is(status.budgetMinor, '1000');
  assert.is(status.spentMinor, '250');
  assert.is(status.remainingMinor, '750');
  assert.equal(status.purposes, ['api:search']);
  const view = (await call(env.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: env.gw.ownerKey })).body;
  assert.is(status.expiresAt, view.expiresAt);

  await tool('paid_fetch', { url: `${env.merchant.url}/data`, purpose: 'api:search' });
  const listed = (await tool('list_receipts')).structuredContent;
  assert.is(listed.total, 2);
  assert.equal(
    listed.receipts.map((x: { receiptId: string }) => x.receiptId),
    (await ownerReceipts(s.sessionId)).map((x) => x.receiptId).reverse(),
    'newest first',
  );
  assert.equal(listed.receipts[1].amount, { amountMinor: '250', currency: 'USD' });
  assert.is(listed.receipts[1].purpose, 'api:search');
  assert.is(listed.receipts[1].signed, undefined);
  const one = (await tool('list_receipts', { limit: 1, includeSigned: true })).structuredContent;
  assert.is(one.receipts.length, 1);
  assert.is(one.receipts[0].signed.receiptId, one.receipts[0].receiptId);
  assert.type(one.receipts[0].signed.signature, 'string');
});

test('a retry with the same idempotencyKey is not paid twice', async () => {
  const s = await createSession(env.gw);
  const tool = await agentFor(s.sessionToken);
  const paidBefore = env.merchant.paid.length;
  const first = (
    await tool('paid_fetch', { url: `${env.merchant.url}/data`, purpose: 'api:search', idempotencyKey: 'order-42' })
  ).structuredContent;
  const again = (
    await tool('paid_fetch', { url: `${env.merchant.url}/data`, purpose: 'api:search', idempotencyKey: 'order-42' })
  ).structuredContent;
  assert.is(first.idempotencyKey, 'order-42');
  assert.is(again.replayed, true);
  assert.is(again.receiptId, first.receiptId);
  assert.is(env.merchant.paid.length, paidBefore + 1);
  assert.is((await ownerReceipts(s.sessionId)).length, 1);
  // Without a key each call gets its own, returned so the agent can retry it.
  const fresh = (await tool('paid_fetch', { url: `${env.merchant.url}/free` })).structuredContent;
  assert.match(fresh.idempotencyKey, /^mcp_/);
});

test('a refused call is a tool error carrying its PROTOCOL.md §9 code; nothing is paid', async () => {
  const s = await createSession(env.gw);
  const tool = await agentFor(s.sessionToken);
  const paidBefore = env.merchant.paid.length;
  const purpose = await tool('paid_fetch', { url: `${env.merchant.url}/data`, purpose: 'api:other' });
  assert.is(purpose.isError, true);
  assert.is(purpose.structuredContent.outcome, 'refused');
  assert.is(purpose.structuredContent.code, 'purpose_not_allowed');
  assert.is(purpose.structuredContent.httpStatus, 402);
  assert.match(purpose.structuredContent.nextStep, /session_status/);
  assert.match(purpose.content[0]!.text, /purpose_not_allowed/);
  const budget = await tool('paid_fetch', { url: `${env.merchant.url}/big`, purpose: 'api:search' });
  assert.is(budget.isError, true);
  assert.is(budget.structuredContent.code, 'budget_exceeded');
  const target = await tool('paid_fetch', { url: 'ftp://127.0.0.1/x' });
  assert.is(target.structuredContent.code, 'target_not_allowed');
  assert.is(env.merchant.paid.length, paidBefore);
  assert.is((await ownerReceipts(s.sessionId)).length, 0);

  // A revoked session: refused with its code, and its status says so.
  await call(env.gw.url, 'DELETE', `/sessions/${s.sessionId}`, { key: env.gw.ownerKey });
  const revoked = await tool('paid_fetch', { url: `${env.merchant.url}/data`, purpose: 'api:search' });
  assert.is(revoked.structuredContent.code, 'session_revoked');
  assert.is(revoked.structuredContent.httpStatus, 410);
  assert.is((await tool('session_status')).structuredContent.state, 'revoked');
});

test(
  'a paused session is a structured result telling the agent to ask its owner, and the ' + 'owner action works',
  async () => {
    const s = await createSession(env.gw, { budget: { amount: '200', currency: 'USD' }, softLimit: { amount: '100' } });
    const tool = await agentFor(s.sessionToken);
    for (let i = 0; i < 2; i++)
      assert.ok(
        (await tool('paid_fetch', { url: `${env.merchant.url}/data`, purpose: 'api:search' })).structuredContent
          .receiptId,
      );
    const paidBefore = env.merchant.paid.length;
    const paused = await tool('paid_fetch', { url: `${env.merchant.url}/data`, purpose: 'api:search' });
    assert.not.ok(paused.isError, 'a pause is not a failure of the tool');
    const p = paused.structuredContent;
    assert.is(p.outcome, 'paused');
    assert.is(p.code, 'session_paused');
    assert.is(p.httpStatus, 409);
    assert.is(p.pauseKind, 'ceiling', 'the session ceiling, not a window');
    assert.is(p.resetsAt, undefined);
    assert.is(p.sessionId, s.sessionId);
    assert.is(p.receiptId, undefined);
    assert.ok(p.ownerAction.includes(`PATCH ${env.gw.url}/sessions/${s.sessionId}`), p.ownerAction);
    assert.ok(p.ownerAction.includes(`${env.gw.url}/console`), p.ownerAction);
    assert.match(p.nextStep, /budget owner/);
    assert.match(paused.content[0]!.text, /^PAUSED/);
    assert.is(env.merchant.paid.length, paidBefore);

    const status = await tool('session_status');
    assert.is(status.structuredContent.state, 'paused');
    assert.is(status.structuredContent.ownerAction, p.ownerAction);
    // The continuation token is the owner's approval: the agent never sees it.
    const owner = (await call(env.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: env.gw.ownerKey })).body;
    assert.match(owner.continuationToken, /^ctn_/);
    assert.not.ok(JSON.stringify([paused, status]).includes(owner.continuationToken));

    // The owner does what ownerAction says; the same call then pays.
    const approved = await call(env.gw.url, 'PATCH', `/sessions/${s.sessionId}`, {
      key: env.gw.ownerKey,
      body: { continuationToken: owner.continuationToken },
    });
    assert.is(approved.status, 200);
    const after = (await tool('paid_fetch', { url: `${env.merchant.url}/data`, purpose: 'api:search' }))
      .structuredContent;
    assert.is(after.outcome, 'response');
    assert.match(after.receiptId, /^rcpt_/);
    assert.is(env.merchant.paid.length, paidBefore + 1);
  },
);

test('binary bodies travel as base64 both ways', async () => {
  const s = await createSession(env.gw);
  const tool = await agentFor(s.sessionToken);
  const img = (await tool('paid_fetch', { url: `${filesUrl}/logo.png` })).structuredContent;
  assert.is(img.bodyEncoding, 'base64');
  assert.equal(Buffer.from(img.body, 'base64'), PNG);
  const sent = (
    await tool('paid_fetch', {
      url: `${env.merchant.url}/free`,
      method: 'PUT',
      body: Buffer.from('héllo').toString('base64'),
      bodyEncoding: 'base64',
    })
  ).structuredContent;
  assert.is(JSON.parse(sent.body).body, 'héllo');
  assert.is(JSON.parse(sent.body).method, 'PUT');
  const bad = await tool('paid_fetch', {
    url: `${env.merchant.url}/free`,
    method: 'POST',
    body: 'not base64!',
    bodyEncoding: 'base64',
  });
  assert.is(bad.isError, true);
  assert.is(bad.structuredContent.code, 'malformed');
});

test(
  'a long body is cut at maxBodyBytes on a character boundary; the same key with a larger ' +
    'limit replays it whole, unpaid',
  async () => {
    const s = await createSession(env.gw);
    const tool = await agentFor(s.sessionToken);
    const long = 'é'.repeat(5000); // 10,000 bytes of UTF-8, echoed back by the merchant in JSON
    const cut = (
      await tool('paid_fetch', { url: `${env.merchant.url}/free`, method: 'PUT', body: long, maxBodyBytes: 101 })
    ).structuredContent;
    assert.is(cut.truncated, true);
    assert.is(cut.bodyEncoding, 'text', 'cut before a split character, so still text');
    assert.ok(
      Buffer.byteLength(cut.body) <= 101 && Buffer.byteLength(cut.body) >= 98,
      String(Buffer.byteLength(cut.body)),
    );
    assert.ok(cut.bodyBytes > 10_000, String(cut.bodyBytes));
    assert.match(cut.nextStep, /maxBodyBytes/);

    const paidBefore = env.merchant.paid.length;
    const small = (
      await tool('paid_fetch', {
        url: `${env.merchant.url}/data`,
        purpose: 'api:search',
        idempotencyKey: 'cut-1',
        maxBodyBytes: 8,
      })
    ).structuredContent;
    assert.is(small.truncated, true);
    assert.is(small.body.length, 8);
    const whole = (
      await tool('paid_fetch', {
        url: `${env.merchant.url}/data`,
        purpose: 'api:search',
        idempotencyKey: 'cut-1',
        maxBodyBytes: 65_536,
      })
    ).structuredContent;
    assert.is(whole.replayed, true);
    assert.is(whole.truncated, undefined);
    assert.is(JSON.parse(whole.body).paid, true);
    assert.is(env.merchant.paid.length, paidBefore + 1, 'paid once');
    assert.is(
      (await tool('paid_fetch', { url: `${env.merchant.url}/free`, maxBodyBytes: 0 })).isError,
      true,
      'a limit below 1 is refused by the schema',
    );
  },
);

test('a token the gateway does not know: every tool says unauthorized', async () => {
  const tool = await agentFor('gw_sess_' + 'A'.repeat(43));
  const status = await tool('session_status');
  assert.is(status.isError, true);
  assert.match(status.content[0]!.text, /unauthorized/);
  const receipts = await tool('list_receipts');
  assert.is(receipts.isError, true);
  assert.match(receipts.content[0]!.text, /unauthorized/);
  const fetched = await tool('paid_fetch', { url: `${env.merchant.url}/free` });
  assert.is(fetched.structuredContent.code, 'unauthorized');
});

test('a gateway that cannot be reached: a tool error saying so, never a crash of the server', async () => {
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((r) => closed.close(r));
  const client = await connect({ CTL_GATEWAY_URL: `http://127.0.0.1:${port}`, CTL_SESSION_TOKEN: 'gw_sess_abc' });
  const r = (await client.callTool({
    name: 'paid_fetch',
    arguments: { url: `${env.merchant.url}/data`, purpose: 'api:search', idempotencyKey: 'k-1' },
  })) as Result;
  assert.is(r.isError, true);
  assert.is(r.structuredContent.outcome, 'failed');
  assert.is(r.structuredContent.code, 'unavailable');
  assert.is(r.structuredContent.idempotencyKey, 'k-1');
  assert.match(r.structuredContent.message, new RegExp(`127\\.0\\.0\\.1:${port}`));
  const status = (await client.callTool({ name: 'session_status', arguments: {} })) as Result;
  assert.is(status.isError, true);
  assert.match(status.content[0]!.text, /could not be reached/);
  assert.equal((await client.listTools()).tools.length, 5, 'the server is still there');
});

test('missing or invalid configuration: one line on stderr naming the variable, a non-zero exit', async () => {
  const run = (env: Record<string, string>) =>
    spawnSync(process.execPath, [SERVER], {
      env: { PATH: process.env.PATH ?? '', ...env },
      input: '',
      encoding: 'utf8',
      timeout: 20_000,
    });
  const token = (await createSession(env.gw)).sessionToken;
  const cases: [Record<string, string>, string][] = [
    [{ CTL_SESSION_TOKEN: token }, 'CTL_GATEWAY_URL'],
    [{ CTL_GATEWAY_URL: 'not a url', CTL_SESSION_TOKEN: token }, 'CTL_GATEWAY_URL'],
    [{ CTL_GATEWAY_URL: 'http://gateway.example.com', CTL_SESSION_TOKEN: token }, 'CTL_GATEWAY_URL'],
    [{ CTL_GATEWAY_URL: env.gw.url }, 'CTL_SESSION_TOKEN'],
    [{ CTL_GATEWAY_URL: env.gw.url, CTL_SESSION_TOKEN: 'sk-secret-value-123' }, 'CTL_SESSION_TOKEN'],
    [{ CTL_GATEWAY_URL: env.gw.url, CTL_SESSION_TOKEN: token, CTL_GATEWAY_LOG_VKEY: 'a+b+c' }, 'CTL_GATEWAY_LOG_VKEY'],
    [{ CTL_GATEWAY_URL: env.gw.url, CTL_SESSION_TOKEN: token, CTL_LOG_STATE_FILE: '/tmp/x' }, 'CTL_LOG_STATE_FILE'],
  ];
  for (const [env, variable] of cases) {
    const r = run(env);
    assert.ok(r.status !== 0 && r.status !== null, `exit ${r.status} for ${JSON.stringify(env)}`);
    assert.ok(r.stderr.startsWith(`ctl-mcp: ${variable}: `), r.stderr);
    assert.is(r.stdout, '', "stdout is the protocol's");
    assert.not.ok(r.stderr.includes('sk-secret-value-123') || r.stderr.includes(token), 'no token in the message');
  }
  // An MCP client sees the start fail instead of waiting forever.
  const client = new Client({ name: 'ctl-mcp-test', version: '1.0.0' });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [SERVER],
    env: { CTL_GATEWAY_URL: env.gw.url },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => (stderr += d));
  await client.connect(transport).then(
    () => assert.unreachable('connected without a token'),
    () => {},
  );
  assert.match(stderr, /CTL_SESSION_TOKEN/);
});

test.run();
