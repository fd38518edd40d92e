/**
 * Checking an anchor on an EVM chain (anvil) with only the pinned configuration: a real anchor
 * passes, found by the contract's events or by the txid the service recorded, and so does a later
 * head consistent with it; a transparency log's checkpoint is anchored as the log signed it, and a
 * checkpoint before or after it passes by the log's consistency proof while one inconsistent with
 * it (a split view) is refused, as is an entry the newest anchor does not cover; forged ones are
 * refused: an event of another contract (a copy deployed by someone else), a sender that is not
 * the pinned address, another root for the anchored size, a block reorganised away (anvil_reorg),
 * too few confirmations, another chain.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createWalletClient, http, defineChain } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAnvil, deployContract, type Anvil } from '../helpers/anvil.js';
import { createChainOutbox, verifyAnchors, type AnchorHead } from '../../service-kit/anchor/index.js';
import { auditHeadSource, checkpointSource } from '../../service-kit/anchor/service.js';
import { createTransparencyLog, generateNoteSigner, serviceLogMigrations } from '../../service-kit/tlog/index.js';
import { hexDecode, verifyCheckpointConsistency } from '../../src/entries/log.js';
import { migrate } from '../../service-kit/index.js';
import { CTL_ANCHOR_ABI } from '../../service-kit/chain/contracts.js';
import { ORIGIN, chainDb, evmLedger, testClock } from './fixtures.js';

let anvil: Anvil;
let contract: `0x${string}`;

test.before(async () => {
  anvil = await startAnvil();
  contract = await deployContract(anvil, 'CtlAnchor', [anvil.accounts[1]!.address]);
});
test.after(() => anvil.stop());

const pinned = (
  o: { contract?: `0x${string}`; address?: `0x${string}`; confirmations?: number; chainId?: number } = {},
) => ({
  rpcUrl: anvil.url,
  chainId: o.chainId ?? anvil.chainId,
  contract: o.contract ?? contract,
  address: o.address ?? anvil.accounts[1]!.address,
  confirmations: o.confirmations ?? 2,
  fromBlock: 0,
});

/** Anchors a fresh chain's head through the outbox and mines `extra` blocks over it. */
async function anchored(size: number, extra = 2) {
  const d = await chainDb();
  const head = await d.grow(size);
  const outbox = createChainOutbox({
    db: d.db,
    ledgers: [await evmLedger(anvil, { anchorContract: contract })],
    sources: [auditHeadSource(d.audit, ORIGIN)],
    now: testClock().now,
  });
  await outbox.runOnce({ readHeads: true });
  const [row] = await outbox.list();
  await outbox.close();
  if (extra) await anvil.mine(extra);
  return { d, head, txid: row!.txid!, blockHash: row!.blockHash };
}

/** Sends `anchor(origin, size, root)` to `at` from `from` (a forger), bypassing everything of ours. */
async function forge(at: `0x${string}`, from: number, head: AnchorHead) {
  const chain = defineChain({
    id: anvil.chainId,
    name: 'anvil',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [anvil.url] } },
  });
  const w = createWalletClient({
    chain,
    transport: http(anvil.url),
    account: privateKeyToAccount(anvil.accounts[from]!.privateKey),
  });
  const hash = await w.writeContract({
    address: at,
    abi: CTL_ANCHOR_ABI,
    functionName: 'anchor',
    args: [head.origin, BigInt(head.size), `0x${head.root}`],
  });
  await anvil.mine(2);
  return hash;
}

test('a real anchor verifies, found by its events or its txid; a later head consistent with it too', async () => {
  const { d, head, txid } = await anchored(4);
  try {
    const [byEvents] = await verifyAnchors({ head, evm: pinned() });
    assert.ok(byEvents!.ok, byEvents!.reason);
    assert.is(byEvents!.anchor!.txid, txid);
    assert.ok(byEvents!.anchor!.confirmations! >= 3);
    const [byRef] = await verifyAnchors({ head, evm: pinned(), refs: [{ chain: 'evm', txid }] });
    assert.ok(byRef!.ok, byRef!.reason);
    const later = await d.grow(3);
    const consistent = async (a: { size: number; root: string }) =>
      (await d.audit.list({ afterSeq: a.size - 1, limit: 1 }))[0]?.hash === a.root;
    const [c] = await verifyAnchors({ head: later, evm: pinned(), consistent });
    assert.ok(c!.ok, c!.reason);
    assert.is(c!.anchor!.size, 4);
    const [without] = await verifyAnchors({ head: later, evm: pinned() });
    assert.not.ok(without!.ok, 'without a consistency check only exact anchors count');
  } finally {
    await d.close();
  }
});

test("a log's checkpoint is anchored; checkpoints before and after it pass by its consistency proof", async () => {
  const d = await chainDb();
  const signer = await generateNoteSigner('tlog.example/ctl-gateway-log');
  await migrate(d.db, serviceLogMigrations('t_log'));
  const log = createTransparencyLog({ db: d.db, prefix: 't_log', signer });
  const grow = async (n: number) => {
    for (let i = 0; i < n; i++) await d.db.tx((q) => log.append(q, { type: 'test', body: { i, at: Math.random() } }));
    await log.publish();
    const t = await log.tree();
    return { origin: log.origin, size: t.size, root: t.root.toString('hex') };
  };
  // What a verifier holding the log's proofs concludes (cli/anchor/service.ts does it over HTTP).
  const consistent = async (older: AnchorHead, newer: AnchorHead) => {
    const proof = older.size && older.size < newer.size ? await log.consistency(older.size, newer.size) : [];
    const cp = (h: AnchorHead) => ({ origin: h.origin, size: h.size, rootHash: hexDecode(h.root) });
    const r = verifyCheckpointConsistency(cp(older), cp(newer), proof);
    return r.valid || r.error.message;
  };
  try {
    const early = await grow(3);
    const head = await grow(4);
    const outbox = createChainOutbox({
      db: d.db,
      ledgers: [await evmLedger(anvil, { anchorContract: contract })],
      sources: [checkpointSource(log)],
      now: testClock().now,
    });
    await outbox.runOnce({ readHeads: true });
    const [row] = await outbox.list();
    await outbox.close();
    await anvil.mine(2);
    // The anchor is the checkpoint the log signed: its size and root, its note kept with it.
    assert.equal(row!.job, { kind: 'anchor', head, source: 'checkpoint', checkpoint: (await log.checkpoint())!.note });
    const [exact] = await verifyAnchors({ head, evm: pinned(), consistent });
    assert.ok(exact!.ok, exact!.reason);
    assert.is(exact!.anchor!.size, 7);
    // Before the anchor (an entry in it is covered), and after it (up to the anchor only).
    const [older] = await verifyAnchors({ head: early, evm: pinned(), consistent, minSize: 2 });
    assert.ok(older!.ok, older!.reason);
    assert.is(older!.anchor!.size, 7, 'the later anchor covers the earlier checkpoint');
    const later = await grow(2);
    const [newer] = await verifyAnchors({ head: later, evm: pinned(), consistent });
    assert.ok(newer!.ok, newer!.reason);
    assert.is(newer!.anchor!.size, 7);
    const [uncovered] = await verifyAnchors({ head: later, evm: pinned(), consistent, minSize: 9 });
    assert.not.ok(uncovered!.ok);
    assert.match(uncovered!.reason!, /the newest anchor \(size 7\) does not cover entry 8 yet/);
    // A split view: a tree of the same size with another root, before and after the anchor.
    const [split] = await verifyAnchors({ head: { ...later, root: 'ab'.repeat(32) }, evm: pinned(), consistent });
    assert.not.ok(split!.ok);
    assert.match(split!.reason!, /the anchored head \(size 7, root [0-9a-f]{64}\) is not part of this log: /);
    const [forkedBefore] = await verifyAnchors({
      head: { ...early, root: 'cd'.repeat(32) },
      evm: pinned(),
      consistent,
    });
    assert.not.ok(forkedBefore!.ok);
    assert.match(
      forkedBefore!.reason!,
      /this head is not part of the later anchored head \(size 7, root [0-9a-f]{64}\)/,
    );
  } finally {
    await log.close();
    await d.close();
  }
});

test('forged: an Anchored event of another contract (a copy its forger deployed) is refused', async () => {
  const d = await chainDb();
  try {
    const head = await d.grow(7);
    // Same bytecode, the forger as anchorer: the events look alike.
    const copy = await deployContract(anvil, 'CtlAnchor', [anvil.accounts[2]!.address], anvil.accounts[2]!);
    const hash = await forge(copy, 2, head);
    const [byRef] = await verifyAnchors({ head, evm: pinned(), refs: [{ chain: 'evm', txid: hash }] });
    assert.not.ok(byRef!.ok);
    assert.match(byRef!.reason!, /comes from 0x[0-9a-fA-F]{40}, not the pinned contract/);
    const [byEvents] = await verifyAnchors({ head, evm: pinned() });
    assert.not.ok(byEvents!.ok, 'the pinned contract has no such event');
  } finally {
    await d.close();
  }
});

test('forged: a sender that is not the pinned address is refused', async () => {
  // The forger's own contract, pinned by mistake or by an attacker who got the address configured:
  // the sender pin still holds.
  const d = await chainDb();
  try {
    const head = await d.grow(8);
    const copy = await deployContract(anvil, 'CtlAnchor', [anvil.accounts[3]!.address], anvil.accounts[3]!);
    const hash = await forge(copy, 3, head);
    const [check] = await verifyAnchors({
      head,
      evm: pinned({ contract: copy }),
      refs: [{ chain: 'evm', txid: hash }],
    });
    assert.not.ok(check!.ok);
    assert.match(check!.reason!, /was sent by 0x[0-9a-fA-F]{40}, not the pinned anchoring address/);
  } finally {
    await d.close();
  }
});

test('forged: another root for the anchored size is refused, and so is a head anchored with two roots', async () => {
  const { d, head } = await anchored(5);
  try {
    const [check] = await verifyAnchors({ head: { ...head, root: 'ee'.repeat(32) }, evm: pinned() });
    assert.not.ok(check!.ok);
    assert.match(check!.reason!, new RegExp(`anchors size 5 of .* with root ${head.root}`));
    // The anchorer itself anchoring a second root for the same size (a fork): the real head is refused too.
    await forge(contract, 1, { ...head, root: 'dd'.repeat(32) });
    const [forked] = await verifyAnchors({ head, evm: pinned() });
    assert.not.ok(forked!.ok);
    assert.match(forked!.reason!, new RegExp(`anchors size 5 of .* with root ${'dd'.repeat(32)}, not ${head.root}`));
  } finally {
    await d.close();
  }
});

test('forged: an anchor in a block reorganised away is refused; one not deep enough too', async () => {
  const { d, head, txid } = await anchored(6, 0);
  try {
    const [shallow] = await verifyAnchors({ head, evm: pinned({ confirmations: 3 }), refs: [{ chain: 'evm', txid }] });
    assert.not.ok(shallow!.ok);
    assert.match(shallow!.reason!, /has 1 confirmations, fewer than 3/);
    await anvil.mine(1);
    // Replace the last two blocks (the anchor's and one more) with empty ones.
    await anvil.rpc('anvil_reorg', [2, []]);
    const [reorged] = await verifyAnchors({ head, evm: pinned({ confirmations: 1 }), refs: [{ chain: 'evm', txid }] });
    assert.not.ok(reorged!.ok);
    assert.match(reorged!.reason!, /not on the chain|no longer on the chain/);
  } finally {
    await d.close();
  }
});

test('another chain than the pinned one is refused', async () => {
  const { d, head } = await anchored(3);
  try {
    const [check] = await verifyAnchors({ head, evm: pinned({ chainId: 1 }) });
    assert.not.ok(check!.ok);
    assert.match(check!.reason!, /is chain 31337, not 1/);
  } finally {
    await d.close();
  }
});

test.run();
