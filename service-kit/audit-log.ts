/**
 * Append-only, hash-chained audit log: every entry's hash covers its own fields
 * and the previous entry's hash, so an edited, removed or inserted entry breaks the chain from
 * that point on. An entry is appended inside the transaction of the change it records (pass
 * that transaction's executor), so the change and its entry commit together or not at all.
 * Appends are serialised in the database: on PostgreSQL every append takes a transaction-level
 * advisory lock before it reads the head (held to commit, so instances sharing the database
 * never fork the chain; take it last in a transaction, after any other lock, so lock order never
 * cycles); on SQLite BEGIN IMMEDIATE holds the only writer lock. `seq` is the primary key, so a
 * fork could not even be stored.
 */
import { createHash } from 'node:crypto';
import { randomId } from './random-id.js';
import type { SqlDatabase, SqlExecutor } from './database.js';
import type { Migration } from './migrate.js';
import { insertRow, type RowInsert } from './row-insert.js';

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
 * The staging table of a high-volume chain (`stage` / `seal`): entries written in the change's
 * transaction without taking the chain's lock, hash-chained shortly after by `seal`.
 */
export function auditStagingMigration(table = 'audit_log'): Migration {
  checkTableName(table);
  return {
    id: `service-kit-${table}-002-staging`,
    sql: `CREATE TABLE ${table}_staged (
      id TEXT PRIMARY KEY,
      staged_ms BIGINT NOT NULL,
      at TEXT NOT NULL,
      actor TEXT NOT NULL,
      action TEXT NOT NULL,
      subject TEXT NOT NULL,
      data TEXT NOT NULL
    );
    CREATE INDEX ${table}_staged_order ON ${table}_staged (staged_ms, id)`,
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

type AuditRow = {
  seq: number | string;
  at: string;
  actor: string;
  action: string;
  subject: string;
  data: string;
  prev_hash: string;
  hash: string;
};
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
  /**
   * Appends one entry: inside the caller's transaction when `q` is given (the change it records),
   * else in a transaction of its own, in which `also` runs too (e.g. the entry's webhook deliveries).
   */
  append(
    input: AuditInput,
    q?: SqlExecutor,
    also?: (q: SqlExecutor, entry: AuditEntry) => Promise<void>,
  ): Promise<AuditEntry>;
  /**
   * For a chain that records every payment: the entry is written in the caller's transaction `q`
   * (the change it records) to the staging table, without the chain's lock, so audited changes
   * do not commit one at a time. `seal()` chains staged entries, in staging order, a batch per
   * transaction under the lock. Needs `auditStagingMigration(table)`.
   */
  stage(input: AuditInput, q: SqlExecutor): Promise<void>;
  /** The row `stage` writes, to fold into the change's own statement (row-insert.ts). */
  stagedRow(input: AuditInput): RowInsert;
  /** Chains up to `limit` staged entries (default 500) in one transaction; resolves to how many. */
  seal(limit?: number): Promise<number>;
  /** Entries with seq > afterSeq, oldest first, at most `limit` (default 100, max 1000). */
  list(options?: { afterSeq?: number; limit?: number }): Promise<AuditEntry[]>;
  /** The newest entry's `seq` and hash (what anchoring commits to); undefined while the log is empty. */
  head(): Promise<{ seq: number; hash: string } | undefined>;
  /** Recomputes the chain; `{ ok: false, badSeq }` names the first entry that does not fit. */
  verify(): Promise<{ ok: true; count: number; headHash: string } | { ok: false; badSeq: number; reason: string }>;
  readonly lockName: string;
}

/**
 * @example const audit = createAuditLog(db); await audit.append({ actor: keyId, action: 'grant.revoke', subject:
 * grantId })
 */
export function createAuditLog(db: SqlDatabase, table = 'audit_log'): AuditLog {
  checkTableName(table);
  const lockName = `ctl_audit:${table}`;
  const appendWith = async (q: SqlExecutor, input: AuditInput): Promise<AuditEntry> => {
    // Re-entrant: a transaction opened with `{ lock: lockName }` already holds it.
    if (q.dialect === 'postgres')
      await q.get('SELECT pg_advisory_xact_lock(hashtextextended(?, 0)) AS locked', [lockName]);
    const head = await q.get<{ seq: number | string; hash: string }>(
      `SELECT seq, hash FROM ${table} ORDER BY seq DESC LIMIT 1`,
    );
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
    await q.run(
      `INSERT INTO ${table} (seq, at, actor, action, subject, data, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      [full.seq, full.at, full.actor, full.action, full.subject, full.data, full.prevHash, full.hash],
    );
    return full;
  };
  // Staged entries sort by (staged_ms, id); the id's random part only breaks ties.
  const stagedId = () => randomId(12);
  type StagedRow = { id: string; at: string; actor: string; action: string; subject: string; data: string };
  return {
    lockName,
    stagedRow(input) {
      return {
        table: `${table}_staged`,
        values: {
          id: stagedId(),
          staged_ms: Date.now(),
          at: input.at ?? new Date().toISOString(),
          actor: input.actor,
          action: input.action,
          subject: input.subject ?? '',
          data: JSON.stringify(input.data ?? {}),
        },
        bigint: ['staged_ms'],
      };
    },
    async stage(input, q) {
      await insertRow(q, this.stagedRow(input));
    },
    seal(limit = 500) {
      return db.tx(
        async (q) => {
          const rows = await q.all<StagedRow>(
            `SELECT id, at, actor, action, subject, data FROM ${table}_staged ORDER BY staged_ms, id LIMIT ?`,
            [limit],
          );
          if (rows.length === 0) return 0;
          const head = await q.get<{ seq: number | string; hash: string }>(
            `SELECT seq, hash FROM ${table} ORDER BY seq DESC LIMIT 1`,
          );
          let seq = head ? Number(head.seq) : 0;
          let prevHash = head ? head.hash : AUDIT_GENESIS_HASH;
          const values: unknown[] = [];
          for (const r of rows) {
            const entry: Omit<AuditEntry, 'hash'> = {
              seq: ++seq,
              at: r.at,
              actor: r.actor,
              action: r.action,
              subject: r.subject,
              data: r.data,
              prevHash,
            };
            prevHash = auditEntryHash(entry);
            values.push(
              entry.seq,
              entry.at,
              entry.actor,
              entry.action,
              entry.subject,
              entry.data,
              entry.prevHash,
              prevHash,
            );
          }
          // A few statements per batch, whatever its size: 50 rows per INSERT, one DELETE per 500 ids.
          for (let i = 0; i < rows.length; i += 50) {
            const n = Math.min(50, rows.length - i);
            await q.run(
              `INSERT INTO ${table} (seq, at, actor, action, subject, data, prev_hash, hash) VALUES ` +
                `${Array(n).fill('(?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`,
              values.slice(i * 8, (i + n) * 8),
            );
          }
          await q.run(
            `DELETE FROM ${table}_staged WHERE id IN (${rows.map(() => '?').join(', ')})`,
            rows.map((r) => r.id),
          );
          return rows.length;
        },
        { lock: lockName },
      );
    },
    async append(input, q, also) {
      const run = async (tq: SqlExecutor) => {
        const entry = await appendWith(tq, input);
        await also?.(tq, entry);
        return entry;
      };
      return q ? run(q) : db.tx(run, { lock: lockName });
    },
    async list(options = {}) {
      const limit = Math.min(Math.max(1, options.limit ?? 100), 1000);
      const rows = await db.all<AuditRow>(`SELECT * FROM ${table} WHERE seq > ? ORDER BY seq ASC LIMIT ?`, [
        options.afterSeq ?? 0,
        limit,
      ]);
      return rows.map(fromRow);
    },
    async head() {
      const h = await db.get<{ seq: number | string; hash: string }>(
        `SELECT seq, hash FROM ${table} ORDER BY seq DESC LIMIT 1`,
      );
      return h ? { seq: Number(h.seq), hash: h.hash } : undefined;
    },
    async verify() {
      let prev = AUDIT_GENESIS_HASH;
      let expected = 1;
      let after = 0;
      for (;;) {
        const rows = (
          await db.all<AuditRow>(`SELECT * FROM ${table} WHERE seq > ? ORDER BY seq ASC LIMIT 1000`, [after])
        ).map(fromRow);
        if (rows.length === 0) return { ok: true, count: expected - 1, headHash: prev };
        for (const e of rows) {
          if (e.seq !== expected)
            return { ok: false, badSeq: e.seq, reason: `expected seq ${expected}, found ${e.seq}` };
          if (e.prevHash !== prev)
            return { ok: false, badSeq: e.seq, reason: 'prevHash does not match the previous entry' };
          const { hash, ...rest } = e;
          if (auditEntryHash(rest) !== hash)
            return { ok: false, badSeq: e.seq, reason: 'hash does not match the entry' };
          prev = hash;
          expected++;
          after = e.seq;
        }
      }
    },
  };
}
