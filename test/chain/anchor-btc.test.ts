/**
 * Anchoring on a Bitcoin-family chain (Debian's litecoind in regtest: the bitcoind JSON-RPC):
 * the outbox funds an OP_RETURN transaction from the pinned address, follows it to the depth and
 * `verifyAnchors` accepts it; a forged anchor is refused: the same payload sent from another
 * address, an anchor whose block was invalidated (a reorganisation), one not deep enough, and
 * an anchored head the current log does not contain. Skipped, with the package named, when
 * litecoind is not installed.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createBtcLedger, createChainOutbox, verifyAnchors, type Ledger } from '../../service-kit/anchor/index.js';
import { auditHeadSource } from '../../service-kit/anchor/service.js';
import { btcAnchorPayload, parseBtcAnchorPayload, opReturnData } from '../../service-kit/anchor/head.js';
import { LITECOIND_MISSING, litecoindPath, startLitecoind, type Litecoind } from '../helpers/litecoind.js';
import { ORIGIN, chainDb, testClock } from './fixtures.js';

const installed = !!litecoindPath();
let ltc: Litecoind;

test.before(async () => {
  if (installed) ltc = await startLitecoind();
});
test.after(async () => {
  await ltc?.stop();
});

const settings = (o: { address?: string; confirmations?: number } = {}) => ({
  rpcUrl: ltc.url,
  credentials: `${ltc.user}:${ltc.password}`,
  address: o.address ?? ltc.address,
  confirmations: o.confirmations ?? 2,
});
const ledger = (wallet = ltc.wallet, address = ltc.address): Ledger =>
  createBtcLedger({ ...settings(), wallet, address, confirmations: 2, feeRate: 2 });

/** Anchors the chain's current head through an outbox; resolves to the confirmed record and the head. */
async function anchorThroughOutbox(d: Awaited<ReturnType<typeof chainDb>>, l: Ledger) {
  const clock = testClock();
  const outbox = createChainOutbox({
    db: d.db,
    ledgers: [l],
    sources: [auditHeadSource(d.audit, ORIGIN)],
    now: clock.now,
  });
  await outbox.runOnce({ readHeads: true });
  const [sent] = await outbox.list();
  assert.is(sent!.status, 'sent');
  await ltc.mine(2);
  clock.advance(10_000);
  await outbox.runOnce({ readHeads: false });
  const [row] = await outbox.list();
  await outbox.close();
  return row!;
}

test('the payload is 76 bytes and reads back', () => {
  const head = { origin: ORIGIN, size: 12, root: 'cd'.repeat(32) };
  const p = btcAnchorPayload(head);
  assert.is(p.length, 76);
  const back = parseBtcAnchorPayload(opReturnData(`6a4c${p.length.toString(16)}${p.toString('hex')}`)!);
  assert.equal({ size: back!.size, root: back!.root }, { size: 12, root: head.root });
  assert.is(parseBtcAnchorPayload(Buffer.alloc(76)), undefined);
});

test('the head is anchored as an OP_RETURN from the pinned address, confirmed, and verifies', async () => {
  if (!installed) return console.log(LITECOIND_MISSING);
  const d = await chainDb();
  try {
    const head = await d.grow(4);
    const row = await anchorThroughOutbox(d, ledger());
    assert.is(row.status, 'confirmed');
    assert.ok(row.confirmations >= 2);
    const raw = await ltc.rpc<{ vout: Array<{ scriptPubKey: { hex: string } }> }>('getrawtransaction', [
      row.txid,
      true,
    ]);
    const payload = raw.vout.map((o) => opReturnData(o.scriptPubKey.hex)).find(Boolean)!;
    assert.equal(payload, btcAnchorPayload(head));
    const [check] = await verifyAnchors({ head, btc: settings(), refs: [{ chain: 'btc', txid: row.txid! }] });
    assert.ok(check!.ok, check!.reason);
    assert.is(check!.anchor!.size, 4);
    // A later head of the same log is consistent with the anchor (the hash chain has the entry).
    const later = await d.grow(2);
    const consistent = async (a: { size: number; root: string }) =>
      (await d.audit.list({ afterSeq: a.size - 1, limit: 1 }))[0]?.hash === a.root;
    const [c2] = await verifyAnchors({
      head: later,
      btc: settings(),
      refs: [{ chain: 'btc', txid: row.txid! }],
      consistent,
    });
    assert.ok(c2!.ok, c2!.reason);
    // …and a log that was rewritten below the anchor is not.
    const [c3] = await verifyAnchors({
      head: later,
      btc: settings(),
      refs: [{ chain: 'btc', txid: row.txid! }],
      consistent: async () => false,
    });
    assert.not.ok(c3!.ok);
    assert.match(c3!.reason!, /not part of this log/);
  } finally {
    await d.close();
  }
});

test('forged: the same payload sent from another address is refused', async () => {
  if (!installed) return console.log(LITECOIND_MISSING);
  await ltc.rpc('createwallet', ['forger']);
  const forger = await ltc.rpc<string>('getnewaddress', ['', 'bech32'], 'forger');
  await ltc.rpc('sendtoaddress', [forger, 1], ltc.wallet);
  await ltc.mine(1);
  const d = await chainDb();
  try {
    const head = await d.grow(3);
    const row = await anchorThroughOutbox(d, ledger('forger', forger));
    assert.is(row.status, 'confirmed', 'the forger anchored with the same software');
    const [check] = await verifyAnchors({ head, btc: settings(), refs: [{ chain: 'btc', txid: row.txid! }] });
    assert.not.ok(check!.ok);
    assert.match(check!.reason!, new RegExp(`spends a coin of ${forger}, not the pinned address ${ltc.address}`));
  } finally {
    await d.close();
  }
});

test('forged: an anchor whose block was invalidated (reorganised away), or too shallow, is refused', async () => {
  if (!installed) return console.log(LITECOIND_MISSING);
  const d = await chainDb();
  try {
    const head = await d.grow(6);
    const row = await anchorThroughOutbox(d, ledger());
    const ref = [{ chain: 'btc', txid: row.txid!, blockHash: row.blockHash }];
    assert.ok((await verifyAnchors({ head, btc: settings(), refs: ref }))[0]!.ok);
    const [deep] = await verifyAnchors({ head, btc: settings({ confirmations: 50 }), refs: ref });
    assert.not.ok(deep!.ok);
    assert.match(deep!.reason!, /confirmations, fewer than 50/);
    await ltc.rpc('invalidateblock', [row.blockHash]);
    const [gone] = await verifyAnchors({ head, btc: settings(), refs: ref });
    assert.not.ok(gone!.ok);
    assert.match(gone!.reason!, /not in a block of the current chain/);
    await ltc.rpc('reconsiderblock', [row.blockHash]);
    assert.ok((await verifyAnchors({ head, btc: settings(), refs: ref }))[0]!.ok);
  } finally {
    await d.close();
  }
});

test.run();
