// The books of bench/campaign.mjs, read from three sides and held against each other:
// - the merchants' own counts: the X-Payment merchant's paid retries, the gateways' ledger rail
//   rows (the X-Payment money), the EVM ledger's transfers (the x402 money);
// - the receipts, through the owner API (GET /sessions/{id}/receipts);
// - the sessions' spent and reserved, through the owner API (GET /sessions/{id}).
// The gateway's own tables are read only to tell an x402 authorization still cashable (its
// reservation is held by design, gateway/payments/schemes/x402/protocol.ts) from a reservation left behind.
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const { openDatabase } = await import(pathToFileURL(join(root, 'build', 'service-kit', 'index.js')).href);

async function owner(url, key, path) {
  const res = await fetch(url + path, { headers: { authorization: `Bearer ${key}` } });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

/** One store's side of the books: sessions and receipts via its owner API, rows from its tables. */
export async function readStore(store, webhookUrl) {
  const url = store.gateways()[0];
  if (!url) throw new Error(`${store.name}: no gateway up to read the books from`);
  const sessions = [];
  for (const id of store.sessionIds()) {
    const [view, receipts] = await Promise.all([
      owner(url, store.ownerKey, `/sessions/${id}`),
      owner(url, store.ownerKey, `/sessions/${id}/receipts`),
    ]);
    sessions.push({
      id,
      ceiling: BigInt(view.budget.amount),
      spent: BigInt(view.spentMinor),
      reserved: BigInt(view.reservedMinor),
      receipts: receipts.receipts,
    });
  }
  const db = await openDatabase(store.dbUrl, { schema: store.schema, poolSize: 1 });
  try {
    return {
      name: store.name,
      sessions,
      ledger: await db.all(`SELECT payment_id, tx_ref, address FROM gw_ledger WHERE status = 'paid'`),
      open: await db.all(
        `SELECT p.id, p.state, p.rail, p.amount, x.valid_before, x.nonce FROM gw_payments p
         LEFT JOIN gw_x402_payments x ON x.payment_id = p.id WHERE p.state IN ('reserved', 'paying')`,
      ),
      x402: await db.all(
        `SELECT x.payment_id, x.nonce, p.state FROM gw_x402_payments x JOIN gw_payments p ON p.id = x.payment_id`,
      ),
      dispatches: webhookUrl
        ? await db.all(`SELECT message_id, status FROM gw_webhook_dispatches WHERE endpoint = ?`, [webhookUrl])
        : [],
    };
  } finally {
    await db.close();
  }
}

/**
 * The invariants, each `{ ok, breaches: [why…] }`. `final`: after the last reconcile, when no
 * reservation may stay open; otherwise an x402 authorization still cashable (valid_before +
 * margin ahead) may hold its reservation and its transfer may wait for its receipt.
 */
export function checkBooks({ stores, xpay, x402, webhooks, final, holdMarginMs, now = Date.now() }) {
  const inv = {
    paidOnce: [],
    receiptForEveryPayment: [],
    withinCeiling: [],
    reservationsSettled: [],
    webhooksOnce: [],
  };
  // On a real node (campaign-merchants.mjs startX402NodeWorld) the x402 books are checked against
  // what left the payer's account on the chain, not only against the transfers seen.
  if (x402.chainMoved !== undefined) inv.booksEqualChain = [];
  const receipts = stores.flatMap((s) => s.sessions.flatMap((x) => x.receipts));
  const byTxRef = new Map(receipts.map((r) => [r.txRef, r]));
  const held = new Set();
  const heldNonces = new Set();
  for (const s of stores) {
    for (const p of s.open) {
      const cashable =
        p.rail === 'x402' &&
        p.state === 'paying' &&
        p.valid_before !== null &&
        Number(p.valid_before) + holdMarginMs > now;
      if (cashable && !final) {
        held.add(p.id);
        heldNonces.add(String(p.nonce).toLowerCase());
      } else inv.reservationsSettled.push(`${s.name}: payment ${p.id} (${p.rail}) still ${p.state}`);
    }
  }

  // Nothing paid twice: per agent request, one ledger row, one receipt txid at the merchant, one EVM transfer.
  const count = (keys) => keys.reduce((m, k) => m.set(k, (m.get(k) ?? 0) + 1), new Map());
  for (const [address, n] of count(stores.flatMap((s) => s.ledger.map((r) => r.address))))
    if (n > 1) inv.paidOnce.push(`ledger rail: ${address} paid ${n} times`);
  for (const [req, txids] of xpay.paid)
    if (new Set(txids).size > 1)
      inv.paidOnce.push(`X-Payment merchant: ${req} paid with ${new Set(txids).size} receipts`);
  const reqOf = x402.requestByNonce();
  const transfers = x402.ledger.transfers;
  for (const t of transfers)
    if (!reqOf.has(t.nonce.toLowerCase()))
      inv.paidOnce.push(`EVM ledger: transfer ${t.tx} for an authorization the merchant was never sent`);
  for (const [req, n] of count(transfers.map((t) => reqOf.get(t.nonce.toLowerCase())).filter(Boolean)))
    if (n > 1) inv.paidOnce.push(`EVM ledger: ${req} paid ${n} times`);

  // No paid answer without a receipt (once reconciled), and no receipt without money.
  const money = new Set();
  for (const s of stores) {
    for (const r of s.ledger) {
      money.add(r.tx_ref);
      if (!byTxRef.has(r.tx_ref))
        inv.receiptForEveryPayment.push(`${s.name}: ledger payment ${r.payment_id} has no receipt`);
    }
  }
  for (const [req, txids] of xpay.paid)
    for (const t of txids)
      if (!byTxRef.has(t))
        inv.receiptForEveryPayment.push(`X-Payment merchant served ${req} for ${t}, which has no receipt`);
  const nonceRefs = new Set(receipts.map((r) => r.txRef.split('/').pop().toLowerCase()));
  for (const t of transfers) {
    const ref = `txid:${t.tx}`;
    money.add(ref);
    money.add(`nonce:${t.nonce.toLowerCase()}`);
    if (!byTxRef.has(ref) && !nonceRefs.has(t.nonce.toLowerCase()) && !heldNonces.has(t.nonce.toLowerCase())) {
      inv.receiptForEveryPayment.push(`EVM transfer ${t.tx} (${reqOf.get(t.nonce.toLowerCase())}) has no receipt`);
    }
  }
  for (const r of receipts) {
    if (!money.has(r.txRef) && !money.has(`nonce:${r.txRef.split('/').pop().toLowerCase()}`))
      inv.receiptForEveryPayment.push(`receipt ${r.receiptId} (${r.txRef}) names no payment`);
  }

  // Spent never above the ceiling, and equal to the receipts; reserved only for held payments.
  for (const s of stores) {
    for (const x of s.sessions) {
      const receipted = x.receipts.reduce((a, r) => a + BigInt(r.amount.amountMinor), 0n);
      if (x.spent > x.ceiling || x.spent + x.reserved > x.ceiling)
        inv.withinCeiling.push(`${s.name} ${x.id}: spent ${x.spent} + reserved ${x.reserved} > ceiling ${x.ceiling}`);
      if (x.spent !== receipted)
        inv.withinCeiling.push(`${s.name} ${x.id}: spent ${x.spent} but receipts total ${receipted}`);
    }
    const heldHere = s.open.filter((p) => held.has(p.id)).reduce((a, p) => a + BigInt(p.amount), 0n);
    const reserved = s.sessions.reduce((a, x) => a + x.reserved, 0n);
    if (reserved !== heldHere)
      inv.reservationsSettled.push(
        `${s.name}: ${reserved} reserved, ${heldHere} of it by cashable x402 authorizations`,
      );
  }

  if (inv.booksEqualChain) {
    const isX402 = (r) => String(r.rail ?? '').startsWith('x402');
    const receipted = receipts.filter(isX402).reduce((a, r) => a + BigInt(r.amount.amountMinor), 0n);
    const heldX402 = stores
      .flatMap((s) => s.open)
      .filter((p) => held.has(p.id))
      .reduce((a, p) => a + BigInt(p.amount), 0n);
    const transferred = transfers.reduce((a, t) => a + BigInt(t.value), 0n);
    if (transferred !== x402.chainMoved)
      inv.booksEqualChain.push(
        `the node's transfers total ${transferred}, the payer's balance fell ${x402.chainMoved}`,
      );
    // Receipted money moved; only a held (still cashable) authorization may have moved unreceipted.
    if (x402.chainMoved < receipted || x402.chainMoved > receipted + heldX402)
      inv.booksEqualChain.push(
        `x402 receipts total ${receipted} (${heldX402} held) while ${x402.chainMoved} left the payer on the node`,
      );
  }

  // Webhooks: every event of the outbox received, by webhook-id, none unknown (the receiver
  // de-duplicates on the id, as the outbox's at-least-once delivery asks; duplicates are counted).
  if (webhooks && final) {
    const got = webhooks.ids();
    const events = stores.flatMap((s) => s.dispatches);
    for (const d of events) {
      if (d.status !== 'delivered') inv.webhooksOnce.push(`event ${d.message_id} is ${d.status}`);
      if (!got.has(d.message_id)) inv.webhooksOnce.push(`event ${d.message_id} never arrived`);
    }
    const known = new Set(events.map((d) => d.message_id));
    for (const id of got) if (!known.has(id)) inv.webhooksOnce.push(`webhook ${id} is no event of the outbox`);
  }
  const result = Object.fromEntries(
    Object.entries(inv).map(([k, breaches]) => [k, { ok: breaches.length === 0, breaches }]),
  );
  return {
    ok: Object.values(result).every((r) => r.ok),
    invariants: result,
    held: held.size,
    receipts: receipts.length,
    transfers: transfers.length + stores.reduce((a, s) => a + s.ledger.length, 0),
  };
}
