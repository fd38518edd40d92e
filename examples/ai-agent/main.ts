/**
 * An AI agent paying for an API through the gateway (spec §4.4 agent-side client):
 * the agent holds only a session token, never a key; it calls the merchant through
 * `session.fetch` and never sees the 402. When a call would cross the soft ceiling, its
 * `onSoftLimit` asks the budget owner, who approves once; the next time the owner says no,
 * and the agent stops cleanly with the budget spent to the cent.
 *
 *   npm run compile && node build/examples/ai-agent/main.js
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGatewayClient, CtlError, GatewayError } from '../../src/index.js';
import { openDatabase, listen, silentLogger } from '../../service-kit/index.js';
import { openGateway } from '../../gateway/server.js';
import { expect } from '../shared/local-authority.js';

// A summarisation API at 0.25 USD a call that only speaks the spec's x402 dialect.
const api = createServer((req, res) => {
  if (typeof req.headers['x-payment-receipt'] !== 'string') {
    res.writeHead(402, { 'x-payment': JSON.stringify({ amount: '25', currency: 'USD', address: 'acct_summarizer' }) });
    return res.end();
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ summary: `summary of ${req.url}` }));
});
await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
const apiHost = `127.0.0.1:${(api.address() as AddressInfo).port}`;

const dir = mkdtempSync(join(tmpdir(), 'ctl-ai-agent-'));
const adminKey = 'example-admin-key-0123456789';
const gateway = await openGateway({
  db: await openDatabase(`sqlite:${join(dir, 'gateway.db')}`),
  adminKey,
  logger: silentLogger(),
  targets: { allowPrivate: false, allowHosts: [apiHost] },
});
const server = await listen(gateway.app, { port: 0 });
try {
  // The budget owner: 1.00 USD for summaries, one soft extension of 0.50, thirty minutes.
  const owner = createGatewayClient({
    baseUrl: server.url,
    ownerKey: (
      (await (
        await fetch(`${server.url}/admin/owners`, {
          method: 'POST',
          headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
          body: '{"label":"ops team"}',
        })
      ).json()) as { apiKey: string }
    ).apiKey,
  });
  const expiresAt = new Date(Date.now() + 30 * 60_000).toISOString().replace(/\.\d+Z$/, 'Z');
  const { sessionId, sessionToken } = await owner.createSession({
    budget: { amount: '100', currency: 'USD' },
    purposes: ['api:summarize'],
    expiresAt,
    label: 'summarizer agent',
    softLimit: { amount: '50' },
  });
  console.log(`owner: session ${sessionId}, 1.00 USD + one soft extension of 0.50`);

  // The agent: its only credential is the token. The owner approves the first extension only.
  let approvals = 0;
  const agent = createGatewayClient({ baseUrl: server.url }).session(sessionToken, {
    sessionId,
    onSoftLimit: async (info) => {
      const token = approvals++ === 0 ? (await owner.getSession(sessionId)).continuationToken : undefined;
      console.log(`agent: soft limit reached (${info.message}); owner ${token ? 'approves' : 'declines'}`);
      return token;
    },
  });
  let done = 0;
  for (let doc = 1; doc <= 10; doc++) {
    try {
      const res = await agent.fetch(`http://${apiHost}/summarize?doc=${doc}`, { purpose: 'api:summarize' });
      const body = (await res.json()) as { summary: string };
      console.log(`agent: doc ${doc} → ${body.summary} (HTTP ${res.status})`);
      done++;
    } catch (e) {
      // The gateway's refusals carry a stable code (PROTOCOL.md §9): the agent stops on any of them.
      if (!(e instanceof GatewayError || e instanceof CtlError)) throw e;
      console.log(`agent: doc ${doc} not paid: ${e.code}; stopping`);
      break;
    }
  }
  const view = await owner.getSession(sessionId);
  const { receipts } = await owner.receipts(sessionId);
  console.log(
    `owner: ${done} calls paid, spent ${view.spentMinor} of ${view.budget.amount} minor ` +
      `units, state ${view.state}, ${receipts.length} receipts`,
  );
  expect(done === 6, 'four calls within 1.00, two more after the one approved extension');
  expect(view.spentMinor === '150' && receipts.length === 6, 'spent exactly the budget plus the extension');
  console.log('OK ai-agent');
} finally {
  await server.close();
  api.close();
  rmSync(dir, { recursive: true, force: true });
}
