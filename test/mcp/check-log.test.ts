/**
 * check_log through the ctl-mcp server (spawned over stdio): the agent pins the gateway log's key
 * (CTL_GATEWAY_LOG_VKEY), keeps the last checkpoint it accepted in CTL_LOG_STATE_FILE across runs,
 * and proves its receipts are in the log. In front of the real gateway sits a relay that can show
 * this agent another tree of the same size, signed by the log's own key (a split view), or a
 * smaller tree (a rewritten history): a later run of the server refuses both with a stable code and
 * keeps the checkpoint it had. Without a key the tool says it is not configured (a bad key stops
 * the server at start: mcp-server.test.ts).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { generateNoteSigner } from '../../service-kit/tlog/index.js';
import { parseCheckpoint, parseNote, signCheckpoint } from '../../src/entries/log.js';
import {
  createSession,
  proxy,
  sqliteDb,
  startMerchant,
  startTestGateway,
  type Merchant,
  type TestDb,
  type TestGateway,
} from '../gateway/helpers.js';

const SERVER = fileURLToPath(new URL('../../mcp/main.js', import.meta.url));
const logKey = await generateNoteSigner('mcp.test/ctl-gateway-log');
const dir = mkdtempSync(join(tmpdir(), 'ctl-mcp-log-'));
const stateFile = join(dir, 'gateway-log.txt');

let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;
let relay: Server;
let relayUrl = '';
/** What the relay serves at /log/checkpoint instead of the gateway's, when set. */
let forged: string | undefined;
const clients: Client[] = [];

type Result = { isError?: boolean; content: { type: string; text: string }[]; structuredContent?: any };

async function agent(token: string, env: Record<string, string> = {}) {
  const client = new Client({ name: 'ctl-mcp-log-test', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [SERVER],
      env: { CTL_GATEWAY_URL: relayUrl, CTL_SESSION_TOKEN: token, ...env },
      stderr: 'pipe',
    }),
  );
  clients.push(client);
  return (args: Record<string, unknown> = {}) =>
    client.callTool({ name: 'check_log', arguments: args }) as Promise<Result>;
}
const pinned = { CTL_GATEWAY_LOG_VKEY: logKey.vkey, CTL_LOG_STATE_FILE: stateFile };

test.before(async () => {
  db = sqliteDb();
  gw = await startTestGateway(db, { log: { skey: logKey.skey } });
  merchant = await startMerchant({ amount: '100' });
  relay = createServer(async (req, res) => {
    if (forged !== undefined && req.url === '/log/checkpoint') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      return res.end(forged);
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(([k, v]) => typeof v === 'string' && k !== 'host' && k !== 'connection'),
    ) as Record<string, string>;
    const up = await fetch(`${gw.url.replace(/\/$/, '')}${req.url}`, {
      method: req.method,
      headers,
      body: chunks.length ? Buffer.concat(chunks) : undefined,
    });
    res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/octet-stream' });
    res.end(Buffer.from(await up.arrayBuffer()));
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  relayUrl = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
});
test.after(async () => {
  for (const c of clients) await c.close();
  await new Promise((r) => relay.close(r));
  await gw.close();
  await merchant.close();
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

test('check_log: kept across runs, receipts proven, a split view and a rewrite refused', async () => {
  const s = await createSession(gw);
  const paid = await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'api:search' });
  assert.is(paid.status, 200);
  const receiptId = paid.headers.get('x-ctl-receipt-id')!;
  await gw.gw.log!.log.publish();

  // Without a pinned key the tool is there but says what it needs.
  const bare = await (await agent(s.sessionToken))();
  assert.ok(bare.isError);
  assert.is(JSON.parse(bare.content[1]!.text).code, 'unsupported_feature');

  const first = await agent(s.sessionToken, pinned);
  const a = await first({ receiptIds: [receiptId] });
  assert.not.ok(a.isError, a.content[0]?.text);
  assert.is(a.structuredContent.outcome, 'consistent');
  assert.is(a.structuredContent.previousSize, null);
  assert.equal(
    a.structuredContent.included.map((x: { receiptId: string }) => x.receiptId),
    [receiptId],
  );
  const kept = readFileSync(stateFile, 'utf8');
  const size = parseCheckpoint(parseNote(kept).text).size;
  assert.is(a.structuredContent.size, size);

  // The log grows: a new run of the server extends what the file kept.
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/b`, { purpose: 'api:search' })).status, 200);
  await gw.gw.log!.log.publish();
  const second = await agent(s.sessionToken, pinned);
  const b = await second();
  assert.is(b.structuredContent.outcome, 'consistent');
  assert.is(b.structuredContent.previousSize, size);
  assert.ok(b.structuredContent.size > size);
  const keptNow = readFileSync(stateFile, 'utf8');
  const cp = parseCheckpoint(parseNote(keptNow).text);

  // A split view: the log's own key signs another tree of the size this agent kept.
  forged = await signCheckpoint({ origin: cp.origin, size: cp.size, rootHash: new Uint8Array(32).fill(7) }, [
    logKey.note!,
  ]);
  const split = await (await agent(s.sessionToken, pinned))();
  assert.ok(split.isError);
  assert.is(split.structuredContent?.code ?? JSON.parse(split.content[1]!.text).code, 'log_inconsistent');
  assert.match(split.content[0]!.text, 'Stop paying');
  assert.is(readFileSync(stateFile, 'utf8'), keptNow, 'the kept checkpoint is unchanged');

  // A rewritten history: a smaller tree than one already seen.
  forged = await signCheckpoint({ origin: cp.origin, size: 1, rootHash: new Uint8Array(32).fill(8) }, [logKey.note!]);
  const shrunk = JSON.parse((await (await agent(s.sessionToken, pinned))()).content[1]!.text);
  assert.is(shrunk.code, 'log_inconsistent');
  // Signed by another key: not the pinned log's.
  const stranger = await generateNoteSigner(cp.origin);
  forged = await signCheckpoint({ origin: cp.origin, size: cp.size + 1, rootHash: cp.rootHash }, [stranger.note!]);
  const unsigned = JSON.parse((await (await agent(s.sessionToken, pinned))()).content[1]!.text);
  assert.is(unsigned.code, 'checkpoint_signature_invalid');
  forged = undefined;
  assert.is((await (await agent(s.sessionToken, pinned))()).structuredContent.outcome, 'consistent');
});

test.run();
