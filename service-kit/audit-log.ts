/**
 * Append-only, hash-chained audit log (issue 3 §3): every entry's hash covers its own fields
 * and the previous entry's hash, so an edited, removed or inserted entry breaks the chain from
 * that point on. Appends are serialised by a transaction lock (two processes on one PostgreSQL
 * database keep one chain).
 */
import { createHash } from 'node:crypto';
import type { SqlDatabase, SqlExecutor } from './database.js';
import type { Migration } from './migrate.js';

export interface AuditEntry {
  seq: number;
  at: string;
  /** who: an API key id, 'bootstrap', 'system' */
  actor: string;
  /** what: e.g. 'grant.issue', 'grant.revoke' */
  action: string;
  /** the object acted on, e.g. a grant id ('' when none) */
  subject: string;
  /** details as JSON text, exactly as hashed */
  data: string;
  prevHash: string;
  hash: string;
}

export type AuditInput = { actor: string; action: string; subject?: string; data?: unknown; at?: string };

/** Table names are interpolated into SQL, so only plain identifiers are accepted. */
export function checkTableName(table: string): void {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(table)) throw new RangeError(`table: not a plain identifier: '${table}'`);
}

/** The hash before the first entry. */
export const AUDIT_GENESIS_HASH = '0'.repeat(64);

/** Table for the audit log; add it to the service's migrations. */
export function auditLogMigration(table = 'audit_log'): Migration {
  checkTableName(table);
  return {
    id: `service-kit-${table}-001`,
    sql: `CREATE TABLE ${table} (
      seq BIGINT PRIMARY KEY,
      at TEXT NOT NULL,
      actor TEXT NOT NULL,
      action TEXT NOT NULL,
      subject TEXT NOT NULL,
      data TEXT NOT NULL,
      prev_hash TEXT NOT NULL,
      hash TEXT NOT NULL
    )`,
  };
}

/**
 * hex SHA-256 over the entry's fields and the previous hash. The fields are put in a JSON array
 * (fixed order, strings escaped), so no two different entries give the same input.
 */
export function auditEntryHash(e: Omit<AuditEntry, 'hash'>): string {
  const input = JSON.stringify([e.seq, e.at, e.actor, e.action, e.subject, e.data, e.prevHash]);
  return createHash('sha256').update(input, 'utf8').digest('hex');
}

type AuditRow = { seq: number | string; at: string; actor: string; action: string; subject: string; data: string; prev_hash: string; hash: string };
const fromRow = (r: AuditRow): AuditEntry => ({
  seq: Number(r.seq),
  at: r.at,
  actor: r.actor,
  action: r.action,
  subject: r.subject,
  data: r.data,
  prevHash: r.prev_hash,
  hash: r.hash,
});

export interface AuditLog {
  /** Appends one entry. Pass `q` to append inside a transaction the caller holds (its lock must be `lockName`). */
  append(input: AuditInput, q?: SqlExecutor): Promise<AuditEntry>;
  /** Entries with seq > afterSeq, oldest first, at most `limit` (default 100, max 1000). */
  list(options?: { afterSeq?: number; limit?: number }): Promise<AuditEntry[]>;
  /** Recomputes the chain; `{ ok: false, badSeq }` names the first entry that does not fit. */
  verify(): Promise<{ ok: true; count: number; headHash: string } | { ok: false; badSeq: number; reason: string }>;
  readonly lockName: string;
}

/**
 * @example const audit = createAuditLog(db); await audit.append({ actor: keyId, action: 'grant.revoke', subject: grantId })
 */
export function createAuditLog(db: SqlDatabase, table = 'audit_log'): AuditLog {
  checkTableName(table);
  const lockName = `ctl_audit:${table}`;
  const appendWith = async (q: SqlExecutor, input: AuditInput): Promise<AuditEntry> => {
    const head = await q.get<{ seq: number | string; hash: string }>(`SELECT seq, hash FROM ${table} ORDER BY seq DESC LIMIT 1`);
    const entry: Omit<AuditEntry, 'hash'> = {
      seq: head ? Number(head.seq) + 1 : 1,
      at: input.at ?? new Date().toISOString(),
      actor: input.actor,
      action: input.action,
      subject: input.subject ?? '',
      data: JSON.stringify(input.data ?? {}),
      prevHash: head ? head.hash : AUDIT_GENESIS_HASH,
    };
    const full: AuditEntry = { ...entry, hash: auditEntryHash(entry) };
    await q.run(`INSERT INTO ${table} (seq, at, actor, action, subject, data, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, [
      full.seq,
      full.at,
      full.actor,
      full.action,
      full.subject,
      full.data,
      full.prevHash,
      full.hash,
    ]);
    return full;
  };
  return {
    lockName,
    append(input, q) {
      return q ? appendWith(q, input) : db.tx((tq) => appendWith(tq, input), { lock: lockName });
    },
    async list(options = {}) {
      const limit = Math.min(Math.max(1, options.limit ?? 100), 1000);
      const rows = await db.all<AuditRow>(`SELECT * FROM ${table} WHERE seq > ? ORDER BY seq ASC LIMIT ?`, [options.afterSeq ?? 0, limit]);
      return rows.map(fromRow);
    },
    async verify() {
      let prev = AUDIT_GENESIS_HASH;
      let expected = 1;
      let after = 0;
      for (;;) {
        const rows = (await db.all<AuditRow>(`SELECT * FROM ${table} WHERE seq > ? ORDER BY seq ASC LIMIT 1000`, [after])).map(fromRow);
        if (rows.length === 0) return { ok: true, count: expected - 1, headHash: prev };
        for (const e of rows) {
          if (e.seq !== expected) return { ok: false, badSeq: e.seq, reason: `expected seq ${expected}, found ${e.seq}` };
          if (e.prevHash !== prev) return { ok: false, badSeq: e.seq, reason: 'prevHash does not match the previous entry' };
          const { hash, ...rest } = e;
          if (auditEntryHash(rest) !== hash) return { ok: false, badSeq: e.seq, reason: 'hash does not match the entry' };
          prev = hash;
          expected++;
          after = e.seq;
        }
      }
    },
  };
}
