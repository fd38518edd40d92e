/**
 * delegate_budget through the ctl-mcp server (spawned over stdio) against a real gateway on
 * SQLite (PROTOCOL.md §14): a widening field is refused naming it; the child token started in a
 * sub-agent's own ctl-mcp sees only its slice, is refused past it while the parent still has
 * room, and its spend counts on the parent.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { call, createSession, useGatewayAndMerchant } from '../gateway/helpers.js';

const SERVER = fileURLToPath(new URL('../../mcp/main.js', import.meta.url));
const env = useGatewayAndMerchant(test, { amount: (p) => /^\/p(\d+)/.exec(p)?.[1] ?? '100' });
const clients: Client[] = [];

type Result = { isError?: boolean; content: { type: string; text: string }[]; structuredContent?: any };

async function agentFor(token: string) {
  const client = new Client({ name: 'ctl-mcp-test', version: '1.0.0' });
  const env2 = { CTL_GATEWAY_URL: env.gw.url, CTL_SESSION_TOKEN: token };
  await client.connect(
    new StdioClientTransport({ command: process.execPath, args: [SERVER], env: env2, stderr: 'pipe' }),
  );
  clients.push(client);
  return (name: string, args: Record<string, unknown> = {}) =>
    client.callTool({ name, arguments: args }) as Promise<Result>;
}

const nearly = (iso: string, ms: number) => Math.abs(Date.parse(iso) - Date.now() - ms) < 60_000;

test.after(async () => {
  for (const c of clients) await c.close();
});

test("delegate_budget: the sub-agent's ctl-mcp sees only its slice, and the parent counts its spend", async () => {
  const s = await createSession(env.gw, { purposes: ['api:search', 'data:read'] });
  const parent = await agentFor(s.sessionToken);
  const widened = await parent('delegate_budget', { amountMinor: '100', purposes: ['api:write'] });
  assert.ok(widened.isError);
  assert.equal([widened.structuredContent.code, widened.structuredContent.httpStatus], ['delegation_invalid', 400]);
  assert.match(widened.structuredContent.message, /^purposes\[0\]/);

  const d = await parent('delegate_budget', {
    amountMinor: '300',
    purposes: ['api:search'],
    durationSeconds: 600,
    label: 'hotel',
  });
  assert.not.ok(d.isError, d.content[0]?.text);
  const c = d.structuredContent;
  assert.equal([c.outcome, c.parentId, c.depth, c.budgetMinor], ['delegated', s.sessionId, 1, '300']);
  assert.match(c.sessionToken, /^gw_sess_/);
  assert.ok(nearly(c.expiresAt, 600_000), c.expiresAt);

  const child = await agentFor(c.sessionToken);
  let st = (await child('session_status')).structuredContent;
  assert.equal(
    [st.sessionId, st.budgetMinor, st.remainingMinor, st.purposes, st.parentId, st.label],
    [c.sessionId, '300', '300', ['api:search'], s.sessionId, 'hotel'],
  );
  assert.ok(
    (await child('paid_fetch', { url: `${env.merchant.url}/p200`, purpose: 'api:search' })).structuredContent.receiptId,
  );
  const paidBefore = env.merchant.paid.length;
  const past = (await child('paid_fetch', { url: `${env.merchant.url}/p101`, purpose: 'api:search' }))
    .structuredContent;
  assert.equal([past.outcome, past.code], ['refused', 'budget_exceeded'], 'past its slice (300 - 200)');
  const outside = (await child('paid_fetch', { url: `${env.merchant.url}/p1`, purpose: 'data:read' }))
    .structuredContent;
  assert.equal([outside.outcome, outside.code], ['refused', 'purpose_not_allowed'], "the parent's purpose is not its");
  assert.is(env.merchant.paid.length, paidBefore);
  // The child's receipts are its own; the parent still has room and counts the child's spend.
  assert.is((await child('list_receipts')).structuredContent.total, 1);
  st = (await parent('session_status')).structuredContent;
  assert.equal([st.spentMinor, st.remainingMinor], ['200', '800']);
  assert.is((await parent('list_receipts')).structuredContent.total, 0, 'the receipt names the child');
  assert.ok(
    (await parent('paid_fetch', { url: `${env.merchant.url}/p100`, purpose: 'api:search' })).structuredContent
      .receiptId,
  );

  // A sub-agent's own windows, within the parent's.
  const w = (await parent('delegate_budget', { amountMinor: '50', windows: [{ every: 'PT1H', maxAmountMinor: '40' }] }))
    .structuredContent;
  const view = (await call(env.gw.url, 'GET', `/sessions/${w.sessionId}`, { key: env.gw.ownerKey })).body;
  assert.equal(
    view.windows.map((x: any) => [x.every, x.maxAmountMinor]),
    [['PT1H', '40']],
  );
});

test.run();
