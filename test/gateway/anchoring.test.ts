/**
 * The gateway anchors its audit chain (every session and payment change) on an EVM node (anvil):
 * after sessions and payments the head is anchored by the chain outbox, confirmed, listed at
 * GET /admin/anchors with its origin, and verifies on the chain with only the pinned contract and
 * address; the paid requests never waited for the chain (the node is cut while they run).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startAnvil, deployContract, type Anvil } from '../helpers/anvil.js';
import { verifyAnchors } from '../../service-kit/anchor/index.js';
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

test.before(async () => {
  anvil = await startAnvil();
  contract = await deployContract(anvil, 'CtlAnchor', [anvil.accounts[1]!.address]);
  db = sqliteDb();
  gw = await startTestGateway(db, {
    publicUrl: 'https://pay.example',
    ledgers: [await evmLedger(anvil, { anchorContract: contract, fetch: cut.fetch })],
    anchorTiming: { pollMs: 1, anchorIntervalMs: 1000 },
  });
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await db.drop();
  await anvil.stop();
});

test('the audit head is anchored after payments, listed, and verifies on the chain', async () => {
  cut.state.down = true; // payments go on while the node is unreachable
  const s = await createSession(gw);
  for (let i = 0; i < 3; i++) {
    const r = await proxy(gw, s.sessionToken, `${merchant.url}/w`, { purpose: 'api:search' });
    assert.is(r.status, 200, JSON.stringify(r.body));
  }
  cut.state.down = false;
  await gw.gw.idle(); // the staged audit entries sealed into the chain
  await gw.gw.chain.runOnce({ readHeads: true });
  for (let i = 0; i < 20 && (await gw.gw.chain.list({ status: 'confirmed' })).length === 0; i++)
    await gw.gw.chain.runOnce();
  const listed = (await call(gw.url, 'GET', '/admin/anchors', { key: ADMIN_KEY })).body as any;
  assert.is(listed.logs[0].origin, 'pay.example/ctl-gateway-audit');
  const head = listed.logs[0].head;
  assert.ok(head.size >= 4, `${head.size} entries: the session and its payments`);
  const job = listed.jobs.find((j: any) => j.status === 'confirmed');
  assert.ok(job, JSON.stringify(listed.jobs));
  const anchored = job.job.head;
  const audit = (await call(gw.url, 'GET', `/admin/audit?afterSeq=${anchored.size - 1}&limit=1`, { key: ADMIN_KEY }))
    .body as any;
  assert.is(audit.entries[0].hash, anchored.root, 'the anchored root is the chain entry at that size');
  const [check] = await verifyAnchors({
    head: anchored,
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
});

test.run();
