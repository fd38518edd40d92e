/**
 * Both services' logs end to end, each witnessed by the other (C2SP tlog-witness over HTTP), and
 * checked only through their public endpoints with the test's own reference verifier
 * (test/helpers/tlog-reference.ts): a paid answer names its receipt's log index, the receipt's
 * inclusion proof verifies against the gateway's signed checkpoint, which carries the
 * authority's cosignature; a grant the authority issues is in its log, cosigned by the gateway.
 * A fork of the gateway's log shown to the authority's witness is a split view: an audit entry,
 * a webhook, a metric and `splitView: true` on /log/status.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { canonicalize, generateKeyPair } from '../../src/index.js';
import { migrate, openDatabase } from '../../service-kit/index.js';
import {
  COSIGNATURE_V1,
  createTransparencyLog,
  generateNoteSigner,
  serviceLogMigrations,
} from '../../service-kit/tlog/index.js';
import {
  call,
  createSession,
  postgresDb,
  proxy,
  sqliteDb,
  startMerchant,
  startTestGateway,
  type Merchant,
  type TestDb,
  type TestGateway,
} from './helpers.js';
import { grantRequest, startTestAuthority, type TestAuthority } from '../authority/harness.js';
import { auditLog } from '../../cli/log/audit.js';
import {
  refConsistency,
  refHasCosignature,
  refLeafHash,
  refOpenCheckpoint,
  refTileIndex,
  refVerifyInclusion,
} from '../helpers/tlog-reference.js';

const gwKey = await generateNoteSigner('gateway.test/ctl-gateway-log');
const auKey = await generateNoteSigner('authority.test/ctl-authority-log');
const auWitness = await generateNoteSigner('authority.test/witness', COSIGNATURE_V1);
const gwWitness = await generateNoteSigner('gateway.test/witness', COSIGNATURE_V1);
const ALERT_SECRET = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;

let db: TestDb;
let gw: TestGateway;
let au: TestAuthority;
let merchant: Merchant;
let alerts: Server;
const alerted: Array<{ type: string; data: Record<string, unknown> }> = [];
let authorityUrl = '';

test.before(async () => {
  alerts = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      alerted.push(JSON.parse(body));
      res.end('ok');
    });
  });
  await new Promise<void>((r) => alerts.listen(0, '127.0.0.1', r));
  merchant = await startMerchant({ amount: '100' });
  db = sqliteDb();
  // The gateway asks the authority's witness (its URL known once the authority listens).
  gw = await startTestGateway(db, {
    log: {
      skey: gwKey.skey,
      witnesses: [{ url: 'http://authority.invalid/witness', vkey: auWitness.vkey }],
      witnessOf: [auKey.vkey],
      witnessSkey: gwWitness.skey,
      fetch: ((url: string, init: RequestInit) =>
        fetch(url.replace('http://authority.invalid', authorityUrl), init)) as typeof fetch,
    },
  });
  au = await startTestAuthority({
    env: {
      CTL_AUTHORITY_LOG_PRIVATE_KEY: auKey.skey,
      CTL_AUTHORITY_LOG_WITNESSES: `${gw.url}/witness=${gwWitness.vkey}`,
      CTL_AUTHORITY_WITNESS_OF: gwKey.vkey,
      CTL_AUTHORITY_WITNESS_PRIVATE_KEY: auWitness.skey,
      CTL_AUTHORITY_LOG_ALERT_URL: `http://127.0.0.1:${(alerts.address() as AddressInfo).port}/alerts`,
      CTL_AUTHORITY_LOG_ALERT_SECRET: ALERT_SECRET,
    },
  });
  authorityUrl = au.url;
});

test.after(async () => {
  await au?.close();
  await gw?.close();
  await merchant?.close();
  await db?.drop();
  await new Promise<void>((r) => alerts.close(() => r()));
});

async function text(url: string) {
  const res = await fetch(url);
  return { status: res.status, text: await res.text(), headers: res.headers };
}

test('a paid receipt is in the gateway log, proven against a checkpoint the authority cosigned', async () => {
  const s = await createSession(gw);
  const paid = await proxy(gw, s.sessionToken, `${merchant.url}/search`, { purpose: 'api:search' });
  assert.is(paid.status, 200);
  const receiptId = paid.headers.get('x-ctl-receipt-id')!;
  const index = Number(paid.headers.get('x-ctl-log-index'));
  assert.ok(Number.isSafeInteger(index), 'the paid answer names its log index');
  const list = await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey });
  assert.is(list.body.logIndex[receiptId], index);
  const receipt = list.body.receipts.find((r: { receiptId: string }) => r.receiptId === receiptId);

  await gw.gw.log!.log.publish();
  const vkey = (await text(`${gw.url}/log/vkey`)).text.trim();
  assert.is(vkey, gwKey.vkey);
  const cp = await text(`${gw.url}/log/checkpoint`);
  assert.match(cp.headers.get('content-type')!, /^text\/plain; charset=utf-8/);
  const checkpoint = refOpenCheckpoint(cp.text, vkey);
  assert.ok(refHasCosignature(cp.text, auWitness.vkey), "the authority's witness cosigned it");
  const status = await call(gw.url, 'GET', '/log/status');
  assert.is(status.body.checkpoint.size, checkpoint.size);
  assert.equal(status.body.checkpoint.cosignedBy, [auWitness.name]);
  const asked = status.body.witnesses.find((w: { name: string }) => w.name === auWitness.name);
  assert.ok(asked.cosignedSize >= checkpoint.size && asked.lastError === null, JSON.stringify(asked));

  const proof = await call(gw.url, 'GET', `/log/proof/inclusion?receiptId=${receiptId}`);
  assert.is(proof.status, 200);
  assert.is(proof.body.index, index);
  assert.is(proof.body.size, checkpoint.size);
  // The entry is the receipt the owner holds, in its typed envelope.
  assert.is(proof.body.entry, canonicalize({ type: 'receipt', body: receipt }));
  const leaf = refLeafHash(Buffer.from(proof.body.entry, 'utf8'));
  const hashes = proof.body.hashes.map((h: string) => Buffer.from(h, 'base64'));
  assert.ok(refVerifyInclusion(index, checkpoint.size, leaf, hashes, checkpoint.root), 'the inclusion proof verifies');

  // The tiles a stock client reads give the same leaves; full or partial, they are immutable.
  const size = checkpoint.size;
  const tile = await fetch(`${gw.url}/log/tile/0/${refTileIndex(0)}.p/${size}`);
  assert.match(tile.headers.get('cache-control')!, /immutable/);
  const hashesAt0 = Buffer.from(await tile.arrayBuffer());
  assert.ok(hashesAt0.subarray(index * 32, index * 32 + 32).equals(leaf));
  const bundle = Buffer.from(await (await fetch(`${gw.url}/log/tile/entries/000.p/${size}`)).arrayBuffer());
  const entries: Buffer[] = [];
  for (let at = 0; at < bundle.length; at += 2 + bundle.readUInt16BE(at))
    entries.push(bundle.subarray(at + 2, at + 2 + bundle.readUInt16BE(at)));
  assert.is(entries.length, size);
  entries.forEach((e, i) => assert.ok(refLeafHash(e).equals(hashesAt0.subarray(i * 32, i * 32 + 32))));
  const types = entries.map((e) => JSON.parse(e.toString('utf8')).type);
  assert.ok(types.includes('session.created') && types.includes('receipt'));

  // Later checkpoints are consistent with this one.
  await proxy(gw, s.sessionToken, `${merchant.url}/search`, { purpose: 'api:search' });
  await call(gw.url, 'POST', `/sessions/${s.sessionId}/revoke`, { key: gw.ownerKey, body: {} });
  await gw.gw.log!.log.publish();
  const later = refOpenCheckpoint((await text(`${gw.url}/log/checkpoint`)).text, vkey);
  assert.ok(later.size > size);
  const cons = await call(gw.url, 'GET', `/log/proof/consistency?from=${size}&to=${later.size}`);
  const laterBundle = Buffer.from(await (await fetch(`${gw.url}/log/tile/0/000.p/${later.size}`)).arrayBuffer());
  const leaves = Array.from({ length: later.size }, (_, i) => laterBundle.subarray(i * 32, i * 32 + 32));
  assert.equal(
    cons.body.hashes,
    refConsistency(size, leaves).map((h) => h.toString('base64')),
  );
});

test('a grant the authority issues is in its log, cosigned by the gateway', async () => {
  const actor = (await generateKeyPair({ alg: 'EdDSA' })).publicJwk;
  const g = await au.call('POST', '/grants', await grantRequest(au, actor));
  assert.is(g.status, 201);
  await au.authority.log!.log.publish();
  const note = (await text(`${au.url}/log/checkpoint`)).text;
  const cp = refOpenCheckpoint(note, auKey.vkey);
  assert.ok(refHasCosignature(note, gwWitness.vkey), "the gateway's witness cosigned it");
  const proof = await au.call('GET', `/log/proof/inclusion?grantId=${g.body.grantId}`, undefined, null);
  assert.is(proof.status, 200);
  assert.is(proof.body.entry, canonicalize({ type: 'grant', body: g.body }));
  const hashes = proof.body.hashes.map((h: string) => Buffer.from(h, 'base64'));
  assert.ok(refVerifyInclusion(proof.body.index, cp.size, refLeafHash(Buffer.from(proof.body.entry)), hashes, cp.root));
  // Its revocation and a Trust Bundle that lists it are logged too, in that order.
  assert.is((await au.call('POST', '/revoke', { grantId: g.body.grantId, reason: 'test' })).status, 200);
  const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
  const b = await au.call('POST', '/trust-bundles', { scope: { category: 'fuel' }, expiresAt });
  assert.is(b.status, 201);
  await au.authority.log!.log.publish();
  const byBundle = await au.call('GET', `/log/proof/inclusion?bundleId=${b.body.bundleId}`, undefined, null);
  assert.is(byBundle.body.entry, canonicalize({ type: 'bundle', body: b.body }));
  const before = await au.call('GET', `/log/proof/inclusion?index=${byBundle.body.index - 1}`, undefined, null);
  const revocation = JSON.parse(before.body.entry);
  assert.is(revocation.type, 'grant.revocation');
  assert.is(revocation.body.grantId, g.body.grantId);
  assert.is(revocation.body.reason, 'test');
  // ctl log audit reads the authority's log as it reads the gateway's: every tile and the root.
  const audited = await auditLog(au.url, { vkey: auKey.vkey, fetch });
  assert.equal(audited.problems, []);
  assert.ok(audited.entries >= 3 && audited.receipts === 0, JSON.stringify(audited));
});

test("a fork of the gateway's log shown to the authority's witness is a split view", async () => {
  const before = await au.call('GET', '/log/status', undefined, null);
  const witnessed = before.body.witness.logs.find((l: { origin: string }) => l.origin === gwKey.name);
  assert.ok(witnessed.size > 0);
  assert.is(before.body.splitView, false);
  // The same key signs another tree of the size the witness cosigned.
  const forkDb = await openDatabase('sqlite::memory:');
  await migrate(forkDb, serviceLogMigrations('gw_log'));
  const fork = createTransparencyLog({ db: forkDb, prefix: 'gw_log', signer: gwKey });
  await forkDb.tx(async (q) => {
    for (let i = 0; i < witnessed.size; i++) await fork.append(q, { type: 'receipt', body: { forged: i } });
  });
  await fork.publish();
  const forged = (await fork.checkpoint())!.note;
  const res = await fetch(`${au.url}/witness/add-checkpoint`, {
    method: 'POST',
    body: `old ${witnessed.size}\n\n${forged}`,
  });
  assert.is(res.status, 409);
  const after = await au.call('GET', '/log/status', undefined, null);
  assert.is(after.body.splitView, true);
  assert.is(after.body.witness.splitViews[0].size, witnessed.size);
  const metrics = await (await fetch(`${au.url}/metrics`)).text();
  assert.match(metrics, new RegExp(`ctl_authority_log_split_views_total\\{origin="${gwKey.name}"\\} 1`));
  const audit = await au.call('GET', '/admin/audit?limit=1000');
  assert.ok(
    audit.body.entries.some((e: { action: string }) => e.action === 'log.split_view'),
    'an audit entry',
  );
  for (let i = 0; i < 100 && alerted.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
  assert.is(alerted[0]?.type, 'log.split_view', 'a webhook');
  await fork.close();
  await forkDb.close();
});

test("PostgreSQL: a paid answer's log index and the receipt's inclusion proof", async () => {
  const pgDb = await postgresDb('the gateway log on PostgreSQL');
  if (!pgDb) return;
  const key = await generateNoteSigner('pg.gateway.test/ctl-gateway-log');
  const g = await startTestGateway(pgDb, { log: { skey: key.skey } });
  try {
    const s = await createSession(g);
    const indices: number[] = [];
    for (const res of await Promise.all(
      Array.from({ length: 8 }, () => proxy(g, s.sessionToken, `${merchant.url}/search`, { purpose: 'api:search' })),
    )) {
      assert.is(res.status, 200);
      indices.push(Number(res.headers.get('x-ctl-log-index')));
    }
    assert.is(new Set(indices).size, 8, 'eight receipts, eight indices');
    await g.gw.log!.log.publish();
    const cp = refOpenCheckpoint((await text(`${g.url}/log/checkpoint`)).text, key.vkey);
    for (const index of indices) {
      const proof = await call(g.url, 'GET', `/log/proof/inclusion?index=${index}`);
      assert.is(JSON.parse(proof.body.entry).type, 'receipt');
      const hashes = proof.body.hashes.map((h: string) => Buffer.from(h, 'base64'));
      assert.ok(refVerifyInclusion(index, cp.size, refLeafHash(Buffer.from(proof.body.entry)), hashes, cp.root));
    }
  } finally {
    await g.close();
    await pgDb.drop();
  }
});

test('bad log requests are clear refusals', async () => {
  for (const [path, status] of [
    ['/log/tile/0/1234', 404],
    ['/log/tile/0/x000/001', 404],
    ['/log/tile/64/000', 404],
    ['/log/proof/inclusion?index=abc', 400],
    ['/log/proof/inclusion?index=0&size=99999999', 400],
    ['/log/proof/consistency?from=5&to=2', 400],
    ['/log/proof/inclusion?receiptId=rcpt_nope', 404],
  ] as const) {
    const r = await call(gw.url, 'GET', path);
    assert.is(r.status, status, path);
    assert.type(r.body.error.code, 'string');
  }
  const w = await fetch(`${gw.url}/witness/add-checkpoint`, { method: 'POST', body: 'nonsense' });
  assert.is(w.status, 400);
});

test.run();
