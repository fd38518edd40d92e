/**
 * paid_fetch when the merchant took the payment and its answer was then lost: the tool says the
 * payment was made (code `paid_response_lost`, the receipt id) and tells the agent not to call
 * again; it sends the call to the gateway once.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { sqliteDb, startTestGateway, createSession, call, type TestGateway, type TestDb } from '../gateway/helpers.js';

const SERVER = fileURLToPath(new URL('../../mcp/main.js', import.meta.url));

let db: TestDb;
let gw: TestGateway;
let merchant: Server;
let front: Server;
let frontUrl = '';
let merchantUrl = '';
let proxied = 0;
let client: Client | undefined;

test.before(async () => {
  // Takes the payment, then resets the connection instead of answering.
  merchant = createServer((req, res) => {
    if (req.headers['x-payment-receipt']) return req.socket.destroy();
    res.writeHead(402, { 'x-payment': JSON.stringify({ amount: '100', currency: 'USD', address: 'merchant-1' }) });
    res.end();
  });
  await new Promise<void>((r) => merchant.listen(0, '127.0.0.1', r));
  merchantUrl = `http://127.0.0.1:${(merchant.address() as AddressInfo).port}`;
  db = sqliteDb();
  gw = await startTestGateway(db);
  // Counts the /proxy calls that reach the gateway, passing everything through.
  const target = new URL(gw.url);
  front = createServer((req, res) => {
    if (req.url === '/proxy') proxied++;
    const out = request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    req.pipe(out);
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  frontUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
});
test.after(async () => {
  await client?.close();
  await new Promise((r) => front.close(r));
  await gw.close();
  merchant.closeAllConnections();
  await new Promise((r) => merchant.close(r));
  await db.drop();
});

test('paid_fetch: paid_response_lost is reported with its receipt and not sent again', async () => {
  const s = await createSession(gw);
  client = new Client({ name: 'ctl-mcp-test', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [SERVER],
      env: { CTL_GATEWAY_URL: frontUrl, CTL_SESSION_TOKEN: s.sessionToken },
      stderr: 'pipe',
    }),
  );
  const r = (await client.callTool({
    name: 'paid_fetch',
    arguments: { url: `${merchantUrl}/data`, purpose: 'api:search' },
  })) as { isError?: boolean; content: { text: string }[]; structuredContent: any };
  assert.is(r.isError, true);
  assert.is(r.structuredContent.outcome, 'refused');
  assert.is(r.structuredContent.code, 'paid_response_lost');
  assert.is(r.structuredContent.httpStatus, 502);
  const receipts = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body
    .receipts as { receiptId: string }[];
  assert.is(receipts.length, 1);
  assert.is(r.structuredContent.receiptId, receipts[0]!.receiptId);
  assert.match(r.structuredContent.nextStep, /Do not call again/);
  assert.is(proxied, 1, 'the call reached the gateway once');
});

test.run();
