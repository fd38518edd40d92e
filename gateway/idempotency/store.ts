/**
 * Idempotency keys of `/proxy` (Stripe's semantics, gateway/README.md "Idempotency-Key"): one row
 * per (session, key). A request claims its key with one atomic INSERT; every later change to the
 * row is conditional on the `attempt` token of whoever holds it, so a first attempt that outlived
 * its lease can no longer write over the attempt that took the key over (fencing). `payment_id`
 * is chosen at the claim and is the id of the one payment the request may reserve: the payment
 * table's primary key makes a second reservation under it impossible, and its state tells a retry
 * whether money moved.
 */
import type { Migration, SqlDatabase, SqlExecutor, Row } from '../../service-kit/index.js';

export const IDEMPOTENCY_MIGRATION: Migration = {
  id: 'gateway-idempotency-keys',
  sql: [
    `CREATE TABLE gw_idempotency (
        session_id TEXT NOT NULL, idem_key TEXT NOT NULL, request_hash TEXT NOT NULL, state TEXT NOT NULL,
        attempt TEXT NOT NULL, payment_id TEXT NOT NULL, lease_until BIGINT NOT NULL,
        status INTEGER, headers TEXT, body TEXT, body_bytes BIGINT,
        created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL,
        PRIMARY KEY (session_id, idem_key))`,
    `CREATE INDEX gw_idempotency_expiry ON gw_idempotency (expires_at)`,
  ].join(';\n'),
};

/** A stored final answer: `body` is base64, absent when it was larger than the bound kept. */
export interface StoredAnswer {
  status: number;
  headers: Record<string, string | string[]>;
  body: string | null;
  bodyBytes: number;
}

export interface IdempotencyRecord {
  sessionId: string;
  key: string;
  requestHash: string;
  state: 'in_flight' | 'done';
  attempt: string;
  paymentId: string;
  leaseUntil: number;
  answer: StoredAnswer | undefined;
  expiresAt: number;
}

function toRecord(r: Row): IdempotencyRecord {
  return {
    sessionId: r.session_id as string,
    key: r.idem_key as string,
    requestHash: r.request_hash as string,
    state: r.state as 'in_flight' | 'done',
    attempt: r.attempt as string,
    paymentId: r.payment_id as string,
    leaseUntil: Number(r.lease_until),
    answer:
      r.state === 'done'
        ? {
            status: Number(r.status),
            headers: JSON.parse(r.headers as string),
            body: (r.body as string | null) ?? null,
            bodyBytes: Number(r.body_bytes ?? 0),
          }
        : undefined,
    expiresAt: Number(r.expires_at),
  };
}

export interface ClaimInput {
  sessionId: string;
  key: string;
  requestHash: string;
  attempt: string;
  paymentId: string;
  now: number;
  leaseUntil: number;
  expiresAt: number;
}

/**
 * Claims the key in one statement: a new row, or a row whose 24 h have passed (not yet pruned)
 * started over. True when this attempt holds the key; false when a live row is there.
 */
export async function claimKey(q: SqlExecutor, c: ClaimInput): Promise<boolean> {
  const row = await q.get<{ attempt: string }>(
    `INSERT INTO gw_idempotency (session_id, idem_key, request_hash, state, attempt, payment_id, lease_until,
      created_at, expires_at)
     VALUES (?, ?, ?, 'in_flight', ?, ?, ?, ?, ?)
     ON CONFLICT (session_id, idem_key) DO UPDATE SET
       request_hash = excluded.request_hash, state = 'in_flight', attempt = excluded.attempt,
       payment_id = excluded.payment_id,
       lease_until = excluded.lease_until, status = NULL, headers = NULL, body = NULL, body_bytes = NULL,
       created_at = excluded.created_at, expires_at = excluded.expires_at
     WHERE gw_idempotency.expires_at <= excluded.created_at
     RETURNING attempt`,
    [c.sessionId, c.key, c.requestHash, c.attempt, c.paymentId, c.leaseUntil, c.now, c.expiresAt],
  );
  return row?.attempt === c.attempt;
}

export async function keyRecord(
  q: SqlExecutor,
  sessionId: string,
  key: string,
): Promise<IdempotencyRecord | undefined> {
  const r = await q.get(`SELECT * FROM gw_idempotency WHERE session_id = ? AND idem_key = ?`, [sessionId, key]);
  return r ? toRecord(r) : undefined;
}

type Held = { sessionId: string; key: string; attempt: string };
const HELD = `session_id = ? AND idem_key = ? AND attempt = ? AND state = 'in_flight'`;
const held = (h: Held) => [h.sessionId, h.key, h.attempt];

/** A key whose holder's lease ran out, taken over by a new attempt (only if still held by `h.attempt`). */
export async function takeOverKey(
  q: SqlExecutor,
  h: Held,
  next: { attempt: string; paymentId: string; leaseUntil: number },
): Promise<boolean> {
  const r = await q.run(`UPDATE gw_idempotency SET attempt = ?, payment_id = ?, lease_until = ? WHERE ${HELD}`, [
    next.attempt,
    next.paymentId,
    next.leaseUntil,
    ...held(h),
  ]);
  return r.changes === 1;
}

/** The request's final answer: the key replays it from now on. */
export async function finishKey(q: SqlExecutor, h: Held, a: StoredAnswer): Promise<boolean> {
  const r = await q.run(
    `UPDATE gw_idempotency SET state = 'done', status = ?, headers = ?, body = ?, body_bytes ` +
      `= ?, lease_until = 0 WHERE ${HELD}`,
    [a.status, JSON.stringify(a.headers), a.body, a.bodyBytes, ...held(h)],
  );
  return r.changes === 1;
}

/** Frees the key: the request moved no money and has no answer worth keeping, so a retry runs afresh. */
export async function freeKey(q: SqlExecutor, h: Held): Promise<boolean> {
  return (await q.run(`DELETE FROM gw_idempotency WHERE ${HELD}`, held(h))).changes === 1;
}

/** Ends the lease now: the outcome waits on reconcile, and retries ask the payment, not this attempt. */
export async function endLease(q: SqlExecutor, h: Held, now: number): Promise<void> {
  await q.run(`UPDATE gw_idempotency SET lease_until = ? WHERE ${HELD}`, [now, ...held(h)]);
}

/**
 * The state of the payment a request reserved under its key (and its receipt), or undefined if it never reserved one.
 */
export async function paymentOutcome(
  q: SqlExecutor,
  paymentId: string,
): Promise<{ state: string; receiptId: string | null } | undefined> {
  const r = await q.get<{ state: string; receipt_id: string | null }>(
    'SELECT p.state, r.id AS receipt_id FROM gw_payments p LEFT JOIN gw_receipts r ON ' +
      'r.payment_id = p.id WHERE p.id = ?',
    [paymentId],
  );
  return r ? { state: r.state, receiptId: r.receipt_id ?? null } : undefined;
}

/** Deletes keys past their 24 h, `batch` rows a statement; returns how many. */
export async function pruneExpiredKeys(q: SqlDatabase, now: number, batch = 1000, maxBatches = 20): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const r = await q.run(
      `DELETE FROM gw_idempotency WHERE (session_id, idem_key) IN (
         SELECT session_id, idem_key FROM gw_idempotency WHERE expires_at <= ? LIMIT ?)`,
      [now, batch],
    );
    total += r.changes;
    if (r.changes < batch) break;
  }
  return total;
}
