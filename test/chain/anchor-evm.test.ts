/**
 * Anchoring an audit chain's head on a real EVM node (anvil) through the chain outbox: the
 * CtlAnchor event carries origin, size and root; the row is confirmed at the configured depth;
 * only the pinned anchorer can anchor; a transaction signed but never broadcast (a crash, a
 * dropped request) is broadcast again as it is, never signed twice; a reorganisation that drops a
 * sent anchor is followed by the same transaction again, mined and confirmed.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createPublicClient, createWalletClient, http, defineChain, keccak256, toBytes, decodeEventLog } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAnvil, deployContract, type Anvil } from '../helpers/anvil.js';
import { createChainOutbox, type ChainEvent } from '../../service-kit/anchor/index.js';
import { auditHeadSource } from '../../service-kit/anchor/service.js';
import { ANCHORED_EVENT, CTL_ANCHOR_ABI } from '../../service-kit/chain/contracts.js';
import { ORIGIN, chainDb, cuttableFetch, evmLedger, testClock } from './fixtures.js';

let anvil: Anvil;
let contract: `0x${string}`;

test.before(async () => {
  anvil = await startAnvil();
  contract = await deployContract(anvil, 'CtlAnchor', [anvil.accounts[1]!.address]);
});
test.after(async () => {
  await anvil.stop();
});

const client = () => createPublicClient({ transport: http(anvil.url) });

async function anchoredOnChain() {
  const logs = await client().getLogs({
    address: contract,
    event: ANCHORED_EVENT,
    args: { originHash: keccak256(toBytes(ORIGIN)) },
    fromBlock: 0n,
  });
  return logs.map((l) => ({
    size: Number(l.args.size),
    root: l.args.root!.slice(2),
    origin: l.args.origin,
    tx: l.transactionHash,
  }));
}

test('the head is anchored as a CtlAnchor event and confirmed at the configured depth', async () => {
  const d = await chainDb();
  const clock = testClock();
  const events: ChainEvent[] = [];
  const before = (await anchoredOnChain()).length;
  try {
    const head = await d.grow(3);
    const outbox = createChainOutbox({
      db: d.db,
      ledgers: [await evmLedger(anvil, { anchorContract: contract, confirmations: 3 })],
      sources: [auditHeadSource(d.audit, ORIGIN)],
      now: clock.now,
      onEvent: (e) => events.push(e),
    });
    await outbox.runOnce({ readHeads: true });
    let [row] = await outbox.list();
    assert.is(row!.status, 'sent');
    assert.equal(
      events.map((e) => e.type),
      ['anchor.submitted'],
    );
    const onChain = (await anchoredOnChain()).slice(before);
    assert.equal(onChain, [{ size: 3, root: head.root, origin: ORIGIN, tx: row!.txid }]);
    // Automine made one block: one confirmation of three.
    clock.advance(10_000);
    await outbox.runOnce({ readHeads: false });
    [row] = await outbox.list();
    assert.is(row!.status, 'sent');
    assert.is(row!.confirmations, 1);
    await anvil.mine(2);
    clock.advance(10_000);
    await outbox.runOnce({ readHeads: false });
    [row] = await outbox.list();
    assert.is(row!.status, 'confirmed');
    assert.is(row!.confirmations, 3);
    assert.ok(row!.blockHash);
    assert.equal(
      events.map((e) => e.type),
      ['anchor.submitted', 'anchor.confirmed'],
    );
    // Nothing new in the log: nothing anchored again.
    clock.advance(120_000);
    await outbox.runOnce({ readHeads: true });
    assert.is((await outbox.list()).length, 1);
    await outbox.close();
  } finally {
    await d.close();
  }
});

test('only the pinned anchorer can anchor: another sender is reverted by the contract', async () => {
  const chain = defineChain({
    id: anvil.chainId,
    name: 'anvil',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [anvil.url] } },
  });
  const other = createWalletClient({
    chain,
    transport: http(anvil.url),
    account: privateKeyToAccount(anvil.accounts[2]!.privateKey),
  });
  await other
    .writeContract({
      address: contract,
      abi: CTL_ANCHOR_ABI,
      functionName: 'anchor',
      args: [ORIGIN, 99n, `0x${'ab'.repeat(32)}`],
    })
    .then(
      () => assert.unreachable('a stranger anchored'),
      (e: Error) => assert.match(e.message, /NotAnchorer/),
    );
  // And the outbox signing with a stranger's key fails before sending anything (the estimate runs the call).
  const d = await chainDb();
  try {
    await d.grow(1);
    const outbox = createChainOutbox({
      db: d.db,
      ledgers: [await evmLedger(anvil, { anchorContract: contract, signer: anvil.accounts[2] })],
      sources: [auditHeadSource(d.audit, ORIGIN)],
    });
    await outbox.runOnce({ readHeads: true });
    const [row] = await outbox.list();
    assert.is(row!.status, 'pending');
    assert.is(row!.txid, null);
    assert.is(row!.attempts, 1);
    assert.match(row!.lastError!, /NotAnchorer/);
    await outbox.close();
  } finally {
    await d.close();
  }
});

test('a transaction signed but not broadcast is broadcast again as it is, never signed twice', async () => {
  const d = await chainDb();
  const clock = testClock();
  const cut = cuttableFetch();
  const before = (await anchoredOnChain()).length;
  try {
    const head = await d.grow(2);
    const ledger = await evmLedger(anvil, { anchorContract: contract, fetch: cut.fetch });
    const outbox = createChainOutbox({
      db: d.db,
      ledgers: [ledger],
      sources: [auditHeadSource(d.audit, ORIGIN)],
      now: clock.now,
    });
    cut.state.drop.add('eth_sendRawTransaction');
    await outbox.runOnce({ readHeads: true });
    const [signed] = await outbox.list();
    assert.is(signed!.status, 'sent');
    assert.ok(signed!.txid);
    assert.is(signed!.attempts, 1, 'the failed broadcast counts');
    assert.equal((await anchoredOnChain()).slice(before), []);
    // A restart: another outbox instance on the same database takes the row after the lease.
    await outbox.close();
    const again = createChainOutbox({
      db: d.db,
      ledgers: [await evmLedger(anvil, { anchorContract: contract })],
      now: clock.now,
    });
    clock.advance(60_000);
    await again.runOnce({ readHeads: false });
    clock.advance(10_000);
    await again.runOnce({ readHeads: false });
    const [row] = await again.list();
    assert.is(row!.status, 'confirmed');
    assert.is(row!.txid, signed!.txid, 'the same transaction');
    const onChain = (await anchoredOnChain()).slice(before);
    assert.equal(onChain, [{ size: 2, root: head.root, origin: ORIGIN, tx: signed!.txid }]);
    await again.close();
  } finally {
    await d.close();
  }
});

test('an anchor a reorganisation drops is sent again and confirmed', async () => {
  const d = await chainDb();
  const clock = testClock();
  try {
    const head = await d.grow(5);
    const outbox = createChainOutbox({
      db: d.db,
      ledgers: [await evmLedger(anvil, { anchorContract: contract, confirmations: 2 })],
      sources: [auditHeadSource(d.audit, ORIGIN)],
      now: clock.now,
    });
    const snap = await anvil.snapshot();
    await outbox.runOnce({ readHeads: true });
    clock.advance(10_000);
    await outbox.runOnce({ readHeads: false });
    const [mined] = await outbox.list();
    assert.is(mined!.confirmations, 1);
    // The block with the anchor is reverted away; the chain goes on without it.
    await anvil.revert(snap);
    await anvil.mine(3);
    const gone = await client()
      .getTransactionReceipt({ hash: mined!.txid as `0x${string}` })
      .catch(() => undefined);
    assert.is(gone, undefined, 'the anchor is off the chain');
    clock.advance(10_000);
    await outbox.runOnce({ readHeads: false }); // unknown to the node: broadcast again
    await anvil.mine(1);
    clock.advance(10_000);
    await outbox.runOnce({ readHeads: false });
    const [row] = await outbox.list();
    assert.is(row!.status, 'confirmed');
    assert.is(row!.txid, mined!.txid);
    assert.is.not(row!.blockHash, mined!.blockHash);
    const receipt = await client().getTransactionReceipt({ hash: row!.txid as `0x${string}` });
    const ev = decodeEventLog({ abi: CTL_ANCHOR_ABI, data: receipt.logs[0]!.data, topics: receipt.logs[0]!.topics });
    assert.equal(
      { size: Number((ev.args as { size: bigint }).size), root: (ev.args as { root: string }).root.slice(2) },
      {
        size: 5,
        root: head.root,
      },
    );
    await outbox.close();
  } finally {
    await d.close();
  }
});

test.run();
