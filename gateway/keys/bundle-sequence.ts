/**
 * The Trust Bundle's sequence and the one signed bundle of each (PROTOCOL.md §12: a counter in
 * the database, raised in the same transaction as each change the bundle reflects, never an
 * instance's clock), so instances sharing a database publish in order and never go backwards.
 */
import type { SqlExecutor } from '../../service-kit/index.js';

/** Raises the sequence inside the caller's transaction; returns the new value. */
export async function raiseBundleSequence(q: SqlExecutor): Promise<number> {
  const r = await q.get<{ value: unknown }>(
    `UPDATE gw_counters SET value = value + 1 WHERE name = 'bundle' RETURNING value`,
  );
  return Number(r!.value);
}

/** The current sequence: the bundle of this number reflects every change committed so far. */
export async function bundleSequence(q: SqlExecutor): Promise<number> {
  const r = await q.get<{ value: unknown }>(`SELECT value FROM gw_counters WHERE name = 'bundle'`);
  return Number(r!.value);
}

export interface StoredBundle {
  sequence: number;
  issuedAt: number;
  body: unknown;
}

export async function storedBundle(q: SqlExecutor, sequence: number): Promise<StoredBundle | undefined> {
  const r = await q.get<{ issued_at: unknown; body: string }>(
    `SELECT issued_at, body FROM gw_bundles WHERE sequence = ?`,
    [sequence],
  );
  return r ? { sequence, issuedAt: Number(r.issued_at), body: JSON.parse(r.body) } : undefined;
}

/** Stores the bundle of a sequence and forgets those far behind it (nobody serves them again). */
export async function storeBundle(q: SqlExecutor, b: StoredBundle): Promise<void> {
  await q.run(`INSERT INTO gw_bundles (sequence, issued_at, body) VALUES (?, ?, ?)`, [
    b.sequence,
    b.issuedAt,
    JSON.stringify(b.body),
  ]);
  await q.run(`DELETE FROM gw_bundles WHERE sequence < ?`, [b.sequence - 16]);
}
