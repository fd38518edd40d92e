/**
 * The ctl-mcp server (spawned over stdio, as an MCP client starts it) against a real gateway on
 * SQLite: session_status shows each budget window with its reset (PROTOCOL.md §13); a full window
 * is refused with its reset and a window's soft limit is a pause of kind window; paid_fetch on a
 * metered merchant reports the held maximum beside what was captured (PROTOCOL.md §15).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { createSession, useGatewayAndMerchant } from '../gateway/helpers.js';

const SERVER = fileURLToPath(new URL('../../mcp/main.js', import.meta.url));
const env = useGatewayAndMerchant(test, { amount: (p) => /^\/p(\d+)/.exec(p)?.[1] ?? '100' });
const clients: Client[] = [];
let meter: Server;
let meterUrl = '';

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

test.before(async () => {
  // A metered merchant (gateway/README.md "X-Payment with maxAmount"): holds ?max, captures ?capture.
  meter = createServer((req, res) => {
    const u = new URL(req.url!, 'http://x');
    if (typeof req.headers['x-payment-hold'] !== 'string') {
      res.writeHead(402, {
        'x-payment': JSON.stringify({ maxAmount: u.searchParams.get('max'), currency: 'USD', address: 'meter-1' }),
      });
      return res.end('{}');
    }
    res.writeHead(200, { 'content-type': 'application/json', 'x-payment-captured': u.searchParams.get('capture')! });
    res.end(JSON.stringify({ kWh: 4.2 }));
  });
  await new Promise<void>((r) => meter.listen(0, '127.0.0.1', r));
  meterUrl = `http://127.0.0.1:${(meter.address() as AddressInfo).port}`;
});
test.after(async () => {
  for (const c of clients) await c.close();
  meter.closeAllConnections();
  await new Promise((r) => meter.close(r));
});

test('a hold shows held and captured; session_status shows each window; a full window is refused', async () => {
  const s = await createSession(env.gw, {
    // Past the hour window's reset: a reset after the session's end gives no resetsAt (gateway/README.md).
    expiresAt: new Date(Date.now() + 2 * 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z'),
    windows: [
      { every: 'PT1H', maxAmountMinor: '300', maxPayments: 5 },
      { every: 'P1D', maxAmountMinor: '500' },
    ],
  });
  const tool = await agentFor(s.sessionToken);
  // A metered merchant holds 200 (it fits the hour's 300), captures 50: the rest goes back to every window.
  const held = (await tool('paid_fetch', { url: `${meterUrl}/charge?max=200&capture=50`, purpose: 'api:search' }))
    .structuredContent;
  assert.is(held.outcome, 'response');
  assert.match(held.receiptId, /^rcpt_/);
  assert.equal(held.amountHeld, { amountMinor: '200', currency: 'USD' });
  assert.equal(held.amountPaid, { amountMinor: '50', currency: 'USD' });
  const paid = await tool('paid_fetch', { url: `${env.merchant.url}/p200`, purpose: 'api:search' });
  assert.is(paid.structuredContent.amountPaid.amountMinor, '200');
  assert.is(paid.structuredContent.amountHeld, undefined, 'a fixed price is no hold');

  const st = (await tool('session_status')).structuredContent;
  assert.is(st.windows.length, 2);
  const [hour, day] = st.windows;
  assert.equal(
    [hour.every, hour.limitMinor, hour.maxPayments, hour.spentMinor, hour.remainingMinor, hour.payments],
    ['PT1H', '300', 5, '250', '50', 2],
  );
  assert.equal([day.every, day.limitMinor, day.spentMinor, day.remainingMinor], ['P1D', '500', '250', '250']);
  assert.ok(nearly(hour.resetsAt, 3_600_000), hour.resetsAt);
  assert.ok(nearly(day.resetsAt, 86_400_000), day.resetsAt);
  assert.equal([hour.reservedMinor, day.reservedMinor, st.reservedMinor], ['0', '0', '0'], 'the rest released');
  assert.is(st.remainingMinor, '750', 'the lifetime budget beside the windows');

  const paidBefore = env.merchant.paid.length;
  const refused = await tool('paid_fetch', { url: `${env.merchant.url}/p51`, purpose: 'api:search' });
  assert.ok(refused.isError);
  const r = refused.structuredContent;
  assert.equal([r.outcome, r.code, r.httpStatus], ['refused', 'window_exceeded', 402]);
  assert.is(r.resetsAt, hour.resetsAt);
  assert.ok(r.retryAfterSeconds > 3500 && r.retryAfterSeconds <= 3600, String(r.retryAfterSeconds));
  assert.match(r.nextStep, /resetsAt/);
  assert.is(env.merchant.paid.length, paidBefore, 'nothing paid');
});

test("a window's soft limit is a pause of kind window, resuming by itself at its reset", async () => {
  const s = await createSession(env.gw, {
    softLimit: { amount: '50' },
    windows: [{ every: 'P1D', maxAmountMinor: '100' }],
  });
  const tool = await agentFor(s.sessionToken);
  await tool('paid_fetch', { url: `${env.merchant.url}/p80`, purpose: 'api:search' });
  const paused = await tool('paid_fetch', { url: `${env.merchant.url}/p30`, purpose: 'api:search' });
  assert.not.ok(paused.isError);
  const p = paused.structuredContent;
  assert.equal([p.outcome, p.pauseKind], ['paused', 'window']);
  assert.ok(nearly(p.resetsAt, 86_400_000), p.resetsAt);
  assert.ok(p.nextStep.includes(`wait until ${p.resetsAt}`), p.nextStep);
  const st = (await tool('session_status')).structuredContent;
  assert.is(st.state, 'paused');
  assert.equal(st.pausedWindow, { every: 'P1D', resetsAt: p.resetsAt });
});

test.run();
