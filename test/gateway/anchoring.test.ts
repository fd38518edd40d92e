/**
 * The gateway anchors its transparency log's signed checkpoint on an EVM node (anvil): after
 * sessions and payments the newest checkpoint is anchored by the chain outbox, confirmed, listed at
 * GET /admin/anchors with its origin and its signed note, and its size and root are the log's; the
 * paid requests never waited for the chain (the node is cut while they run). `ctl anchor verify`
 * walks a paid receipt to its anchor (receipt → inclusion proof → checkpoint → anchor), trusting
 * only the pinned log key, contract and address. With its log turned off, the gateway anchors its
 * audit chain's head instead, and each anchor record says so.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAnvil, deployContract, type Anvil } from '../helpers/anvil.js';
import { runCtl } from '../helpers/run-ctl.js';
import { createFileLedger, headOfCheckpoint, verifyAnchors } from '../../service-kit/anchor/index.js';
import { verifyCheckpoint } from '../../src/entries/log.js';
import { cuttableFetch, evmLedger } from '../chain/fixtures.js';
import {
  sqliteDb,
  startTestGateway,
  startMerchant,
  createSession,
  proxy,
  call,
  ADMIN_KEY,
  type TestGateway,
  type Merchant,
  type TestDb,
} from './helpers.js';

let anvil: Anvil;
let contract: `0x${string}`;
let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;
const cut = cuttableFetch();
const dir = mkdtempSync(join(tmpdir(), 'ctl-gw-anchoring-'));

test.before(async () => {
  anvil = await startAnvil();
  contract = await deployContract(anvil, 'CtlAnchor', [anvil.accounts[1]!.address]);
  db = sqliteDb();
  gw = await startTestGateway(db, {
    publicUrl: 'https://pay.example',
    ledgers: [await evmLedger(anvil, { anchorContract: contract, fetch: cut.fetch })],
    // Heads are read when a test asks (runOnce({ readHeads: true })), never behind its back.
    anchorTiming: { pollMs: 1, anchorIntervalMs: 3_600_000 },
  });
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await db.drop();
  await anvil.stop();
  rmSync(dir, { recursive: true, force: true });
});

const pinned = () => ({
  CTL_ANCHOR_EVM_RPC_URL: anvil.url,
  CTL_ANCHOR_EVM_CHAIN_ID: String(anvil.chainId),
  CTL_ANCHOR_EVM_CONTRACT: contract,
  CTL_ANCHOR_EVM_ADDRESS: anvil.accounts[1]!.address,
  CTL_ANCHOR_EVM_CONFIRMATIONS: '1',
});

/** Signs a checkpoint of what is logged, anchors it, and runs the outbox until it is confirmed. */
async function anchorNow() {
  await gw.gw.idle();
  await gw.gw.log!.log.publish();
  await gw.gw.chain.runOnce({ readHeads: true });
  for (let i = 0; i < 20; i++) {
    const open = [...(await gw.gw.chain.list({ status: 'pending' })), ...(await gw.gw.chain.list({ status: 'sent' }))];
    if (open.length === 0) return;
    await new Promise((r) => setTimeout(r, 5));
    await gw.gw.chain.runOnce();
  }
  throw new Error('the anchor was not confirmed');
}

let receiptFile = '';

test("the log's checkpoint is anchored after payments, listed with its note, and verifies on the chain", async () => {
  cut.state.down = true; // payments go on while the node is unreachable
  const s = await createSession(gw);
  let receiptId = '';
  for (let i = 0; i < 3; i++) {
    const r = await proxy(gw, s.sessionToken, `${merchant.url}/w`, { purpose: 'api:search' });
    assert.is(r.status, 200, JSON.stringify(r.body));
    receiptId = r.headers.get('x-ctl-receipt-id')!;
  }
  cut.state.down = false;
  await anchorNow();
  const listed = (await call(gw.url, 'GET', '/admin/anchors', { key: ADMIN_KEY })).body as any;
  const log = gw.gw.log!.log;
  assert.is(listed.logs[0].origin, 'pay.example/ctl-gateway-log');
  assert.is(listed.logs[0].source, 'checkpoint');
  const job = listed.jobs.find((j: any) => j.status === 'confirmed');
  assert.ok(job, JSON.stringify(listed.jobs));
  const anchored = job.job;
  assert.is(anchored.source, 'checkpoint');
  assert.ok(anchored.head.size >= 4, `${anchored.head.size} entries: the session and its payments`);
  // The anchor carries the checkpoint: the signed note the log published, and the log's own tree at that size.
  const vkey = (await (await fetch(`${gw.url}/log/vkey`)).text()).trim();
  const note = await verifyCheckpoint(anchored.checkpoint, [vkey]);
  assert.ok(note.valid, 'the anchored note is signed by the log');
  assert.equal(headOfCheckpoint(anchored.checkpoint), anchored.head);
  assert.is(await log.checkpointAt(anchored.head.size), anchored.checkpoint);
  assert.is((await log.rootAt(anchored.head.size)).toString('hex'), anchored.head.root);
  const [check] = await verifyAnchors({
    head: anchored.head,
    evm: {
      rpcUrl: anvil.url,
      chainId: anvil.chainId,
      contract,
      address: anvil.accounts[1]!.address,
      confirmations: 1,
      fromBlock: 0,
    },
  });
  assert.ok(check!.ok, check!.reason);

  const receipts = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body as any;
  receiptFile = join(dir, 'receipt.json');
  writeFileSync(receiptFile, JSON.stringify(receipts.receipts.find((r: any) => r.receiptId === receiptId)));
  writeFileSync(join(dir, 'vkey'), vkey);
});

test('ctl anchor verify walks a receipt: inclusion proof → checkpoint → anchor', async () => {
  const r = await runCtl(
    { cwd: dir, env: pinned() },
    ...['anchor', 'verify', '--service', gw.url, '--vkey', `@${join(dir, 'vkey')}`, '--receipt', receiptFile],
  );
  assert.is(r.code, 0, r.out + r.err);
  assert.match(r.out, /pay\.example\/ctl-gateway-log size \d+ root [0-9a-f]{64} \(checkpoint\)/);
  assert.match(r.out, /receipt rcpt_\S+: entry \d+ of pay\.example\/ctl-gateway-log, included in the tree of size \d+/);
  assert.match(r.out, /checkpoint: signed by pay\.example\/ctl-gateway-log/);
  assert.match(r.out, /evm: ok: anchored size \d+ in 0x[0-9a-f]{64}/);

  // An edited receipt is not the entry the log holds; the walk stops there (exit 1).
  const edited = JSON.parse(readFileSync(receiptFile, 'utf8'));
  edited.amount.amountMinor = '1';
  writeFileSync(join(dir, 'edited.json'), JSON.stringify(edited));
  const bad = await runCtl(
    { cwd: dir, env: pinned() },
    ...[
      'anchor',
      'verify',
      '--service',
      gw.url,
      '--vkey',
      `@${join(dir, 'vkey')}`,
      '--receipt',
      join(dir, 'edited.json'),
    ],
  );
  assert.is(bad.code, 1, bad.out + bad.err);
  assert.match(bad.out, /receipt rcpt_\S+: REFUSED: not included at \d+/);
});

test('a receipt logged after the newest anchor is not anchored yet (exit 1), then is', async () => {
  const s = await createSession(gw);
  const r = await proxy(gw, s.sessionToken, `${merchant.url}/late`, { purpose: 'api:search' });
  assert.is(r.status, 200);
  await gw.gw.idle();
  await gw.gw.log!.log.publish();
  const receipts = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body as any;
  writeFileSync(join(dir, 'late.json'), JSON.stringify(receipts.receipts[0]));
  const args = [
    'anchor',
    'verify',
    '--service',
    gw.url,
    '--vkey',
    `@${join(dir, 'vkey')}`,
    '--receipt',
    join(dir, 'late.json'),
  ];
  const before = await runCtl({ cwd: dir, env: pinned() }, ...args);
  assert.is(before.code, 1, before.out + before.err);
  assert.match(before.out, /evm: REFUSED: the newest anchor \(size \d+\) does not cover entry \d+ yet/);
  await anchorNow();
  const after = await runCtl({ cwd: dir, env: pinned() }, ...args);
  assert.is(after.code, 0, after.out + after.err);
});

test("with its log off the gateway anchors its audit chain's head, and the record says so", async () => {
  const offDb = sqliteDb();
  const file = createFileLedger(join(dir, 'anchors.jsonl'));
  const off = await startTestGateway(offDb, {
    publicUrl: 'https://pay.example',
    log: false,
    ledgers: [file],
    anchorTiming: { pollMs: 1, anchorIntervalMs: 3_600_000 },
  });
  try {
    await createSession(off);
    await off.gw.idle();
    await off.gw.chain.runOnce({ readHeads: true });
    for (let i = 0; i < 20 && (await off.gw.chain.list({ status: 'sent' })).length; i++) {
      await new Promise((r) => setTimeout(r, 5));
      await off.gw.chain.runOnce();
    }
    const listed = (await call(off.url, 'GET', '/admin/anchors', { key: ADMIN_KEY })).body as any;
    assert.equal(
      listed.logs.map((l: any) => [l.origin, l.source]),
      [['pay.example/ctl-gateway-audit', 'audit-head']],
    );
    const [job] = listed.jobs;
    assert.is(job.job.source, 'audit-head');
    assert.is(job.job.checkpoint, undefined);
    const audit = (
      await call(off.url, 'GET', `/admin/audit?afterSeq=${job.job.head.size - 1}&limit=1`, { key: ADMIN_KEY })
    ).body as any;
    assert.is(audit.entries[0].hash, job.job.head.root, 'the anchored root is the chain entry at that size');
    assert.is(job.status, 'confirmed');
    assert.is((await file.read()).at(-1)!.root, job.job.head.root, 'the file holds the audit head');
  } finally {
    await off.close();
    await offDb.drop();
  }
});

test.run();
