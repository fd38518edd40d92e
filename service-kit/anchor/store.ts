/**
 * The chain outbox's table (both SQL engines): one row per job and ledger, and a lease per
 * ledger so that one instance at a time talks to a chain for the service (transactions of one
 * signer are sequential: nonces, coins). Rows are the record an operator reads
 * (GET /admin/anchors) and `ctl anchor verify` checks on the chain.
 *
 * A row is `pending` (to be signed), `sent` (signed and recorded, broadcast or about to be,
 * `txid` known), `confirmed` (the ledger shows it `confirmations` deep) or `superseded` (an
 * anchor never signed whose origin has a newer head queued: only the newest head is sent).
 */
import type { SqlDatabase, SqlExecutor } from '../database.js';
import type { Migration } from '../migrate.js';
import { checkTableName } from '../audit-log.js';
import { timeOrderedId } from '../random-id.js';
import type { AnchorHead } from './head.js';
import type { AnchorJob, ChainJob, JobKind } from './ledger.js';

export type ChainJobStatus = 'pending' | 'sent' | 'confirmed' | 'superseded';

export function chainOutboxMigration(table = 'chain_outbox'): Migration {
  checkTableName(table);
  return {
    id: `service-kit-${table}-001`,
    sql: `CREATE TABLE ${table} (
      id TEXT PRIMARY KEY,
      chain TEXT NOT NULL,
      kind TEXT NOT NULL,
      subject TEXT NOT NULL,
      job TEXT NOT NULL,
      status TEXT NOT NULL,
      created_ms BIGINT NOT NULL,
      since_ms BIGINT NOT NULL,
      updated_ms BIGINT NOT NULL,
      next_attempt_ms BIGINT NOT NULL,
      attempts INTEGER NOT NULL,
      last_error TEXT,
      txid TEXT,
      raw TEXT,
      seen INTEGER NOT NULL,
      block_number BIGINT,
      block_hash TEXT,
      confirmations INTEGER NOT NULL,
      sent_ms BIGINT,
      confirmed_ms BIGINT,
      alerted INTEGER NOT NULL
    );
    CREATE INDEX ${table}_work ON ${table} (chain, status, created_ms);
    CREATE INDEX ${table}_subject ON ${table} (chain, kind, subject, created_ms);
    CREATE UNIQUE INDEX ${table}_revocation ON ${table} (chain, subject) WHERE kind = 'revocation';
    CREATE TABLE ${table}_leases (chain TEXT PRIMARY KEY, owner TEXT, until_ms BIGINT NOT NULL)`,
  };
}

/** A row read back (GET /admin/anchors, tests, `ctl anchor verify --service`). */
export interface ChainJobRecord {
  id: string;
  chain: string;
  kind: JobKind;
  /** An anchor's origin, or a revocation token's id. */
  subject: string;
  job: ChainJob;
  status: ChainJobStatus;
  attempts: number;
  lastError: string | null;
  txid: string | null;
  blockNumber: number | null;
  blockHash: string | null;
  confirmations: number;
  /** ISO times: queued; waiting since (inherited from the rows it superseded); signed; confirmed. */
  createdAt: string;
  since: string;
  sentAt: string | null;
  confirmedAt: string | null;
  /** True once it was reported as stalled (unconfirmed for longer than the alert delay). */
  alerted: boolean;
}

export type JobRow = {
  id: string;
  chain: string;
  kind: JobKind;
  subject: string;
  job: string;
  status: ChainJobStatus;
  created_ms: number | string;
  since_ms: number | string;
  next_attempt_ms: number | string;
  attempts: number | string;
  last_error: string | null;
  txid: string | null;
  raw: string | null;
  seen: number | string;
  block_number: number | string | null;
  block_hash: string | null;
  confirmations: number | string;
  sent_ms: number | string | null;
  confirmed_ms: number | string | null;
  alerted: number | string;
};

const iso = (ms: number | string | null) => (ms == null ? null : new Date(Number(ms)).toISOString());

/** A stored job; an anchor recorded before `source` existed was of the audit head. */
function jobOf(text: string): ChainJob {
  const job = JSON.parse(text) as ChainJob;
  return job.kind === 'anchor' && !job.source ? { ...job, source: 'audit-head' as const } : job;
}

export function toRecord(r: JobRow): ChainJobRecord {
  return {
    id: r.id,
    chain: r.chain,
    kind: r.kind,
    subject: r.subject,
    job: jobOf(r.job),
    status: r.status,
    attempts: Number(r.attempts),
    lastError: r.last_error,
    txid: r.txid,
    blockNumber: r.block_number == null ? null : Number(r.block_number),
    blockHash: r.block_hash,
    confirmations: Number(r.confirmations),
    createdAt: iso(r.created_ms)!,
    since: iso(r.since_ms)!,
    sentAt: iso(r.sent_ms),
    confirmedAt: iso(r.confirmed_ms),
    alerted: Number(r.alerted) === 1,
  };
}

const subjectOf = (job: ChainJob) => (job.kind === 'anchor' ? job.head.origin : job.id);

/** A new pending row's values: waiting since `since`, next attempt at `next` after `attempts` failed ones. */
function newRow(chain: string, job: ChainJob, now: number, since = now, next = now, attempts = 0, alerted = 0) {
  return [
    timeOrderedId(now),
    chain,
    job.kind,
    subjectOf(job),
    JSON.stringify(job),
    now,
    since,
    now,
    next,
    attempts,
    alerted,
  ];
}
const INSERT_COLUMNS = `(id, chain, kind, subject, job, status, created_ms, since_ms, updated_ms, next_attempt_ms,
  attempts, seen, confirmations, alerted) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, 0, 0, ?)`;

/** Row-level statements of the outbox (the worker's logic is in outbox.ts). */
export function createChainOutboxStore(db: SqlDatabase, table: string) {
  checkTableName(table);
  return {
    /** A revocation token to mint on `chain`, in the caller's transaction (once per id and chain). */
    async insertRevocation(q: SqlExecutor, chain: string, job: ChainJob, now: number) {
      await q.run(`INSERT INTO ${table} ${INSERT_COLUMNS} ON CONFLICT DO NOTHING`, newRow(chain, job, now));
    },
    /**
     * Queues the anchor `job` on `chain` unless an anchor of its origin as large is queued or done; a newer
     * head supersedes the unsigned one before it and inherits how long it has waited.
     */
    async queueHead(chain: string, job: AnchorJob, now: number): Promise<boolean> {
      const { head } = job;
      return db.tx(async (q) => {
        const last = await q.get<{ job: string }>(
          `SELECT job FROM ${table} WHERE chain = ? AND kind = 'anchor' AND subject = ? AND status <> 'superseded'
           ORDER BY created_ms DESC, id DESC LIMIT 1`,
          [chain, head.origin],
        );
        const queued = last && (JSON.parse(last.job) as { head: AnchorHead }).head;
        if (queued && queued.size >= head.size) return false;
        const older = await q.all<{
          since_ms: number | string;
          attempts: number | string;
          next_attempt_ms: number | string;
          alerted: number | string;
        }>(
          `UPDATE ${table} SET status = 'superseded', updated_ms = ?
           WHERE chain = ? AND kind = 'anchor' AND subject = ? AND status = 'pending' AND txid IS NULL
           RETURNING since_ms, attempts, next_attempt_ms, alerted`,
          [now, chain, head.origin],
        );
        // The new head takes over the wait and the backoff of the ones it replaces: a node that is
        // down is not asked more often because the log keeps growing, and the stall is reported on time.
        const since = Math.min(now, ...older.map((o) => Number(o.since_ms)));
        const next = Math.max(now, ...older.map((o) => Number(o.next_attempt_ms)));
        const attempts = Math.max(0, ...older.map((o) => Number(o.attempts)));
        const alerted = Math.max(0, ...older.map((o) => Number(o.alerted)));
        await q.run(`INSERT INTO ${table} ${INSERT_COLUMNS}`, newRow(chain, job, now, since, next, attempts, alerted));
        return true;
      });
    },
    /** The unfinished rows of `chain`, oldest first. */
    work: (chain: string, limit = 50) =>
      db.all<JobRow>(
        `SELECT * FROM ${table} WHERE chain = ? AND status IN ('pending', 'sent') ORDER BY created_ms, id LIMIT ?`,
        [chain, limit],
      ),
    /** A row's columns set, only while it is still in the status it was read in. */
    async update(r: JobRow, set: Record<string, unknown>, now: number, from: ChainJobStatus = r.status) {
      const cols = Object.keys(set);
      const { changes } = await db.run(
        `UPDATE ${table} SET ${cols.map((c) => `${c} = ?`).join(', ')}, updated_ms = ? WHERE id = ? AND status = ?`,
        [...cols.map((c) => set[c]), now, r.id, from],
      );
      return changes === 1;
    },
    /** Signed: recorded before the broadcast, only if nothing superseded the row meanwhile. */
    async recordSigned(r: JobRow, txid: string, raw: string, now: number, nextMs: number) {
      const { changes } = await db.run(
        `UPDATE ${table} SET status = 'sent', txid = ?, raw = ?, seen = 0, sent_ms = ?, next_attempt_ms = ?,
           block_number = NULL, block_hash = NULL, confirmations = 0, updated_ms = ?
         WHERE id = ? AND status = 'pending' AND txid IS NULL`,
        [txid, raw, now, nextMs, now, r.id],
      );
      return changes === 1;
    },
    /** Rows unconfirmed since before `before` not reported yet, marked reported; and how many are late in all. */
    /** Marks rows reported as stalled; resolves to those this call marked (another instance may have). */
    markStalled: (ids: string[], now: number) =>
      ids.length === 0
        ? Promise.resolve([] as JobRow[])
        : db.all<JobRow>(
            `UPDATE ${table} SET alerted = 1, updated_ms = ? WHERE id IN (${ids.map(() => '?').join(', ')})
             AND alerted = 0 RETURNING *`,
            [now, ...ids],
          ),
    /** Whether `head` would be queued (read only: most passes find the log as it was). */
    async headIsNew(chain: string, head: AnchorHead): Promise<boolean> {
      const last = await db.get<{ job: string }>(
        `SELECT job FROM ${table} WHERE chain = ? AND kind = 'anchor' AND subject = ? AND status <> 'superseded'
         ORDER BY created_ms DESC, id DESC LIMIT 1`,
        [chain, head.origin],
      );
      return !last || (JSON.parse(last.job) as { head: AnchorHead }).head.size < head.size;
    },
    async list(options: { chain?: string; kind?: JobKind; status?: ChainJobStatus; limit?: number } = {}) {
      const where: string[] = [];
      const params: unknown[] = [];
      for (const [col, v] of [
        ['chain', options.chain],
        ['kind', options.kind],
        ['status', options.status],
      ] as const)
        if (v !== undefined) (where.push(`${col} = ?`), params.push(v));
      const limit = Math.min(Math.max(1, options.limit ?? 100), 1000);
      const rows = await db.all<JobRow>(
        `SELECT * FROM ${table} ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
         ORDER BY created_ms DESC, id DESC LIMIT ?`,
        [...params, limit],
      );
      return rows.map(toRecord);
    },
    /** Takes or renews the ledger's lease; false while another instance holds it. */
    async lease(chain: string, owner: string, now: number, leaseMs: number): Promise<boolean> {
      await db.run(`INSERT INTO ${table}_leases (chain, owner, until_ms) VALUES (?, NULL, 0) ON CONFLICT DO NOTHING`, [
        chain,
      ]);
      const { changes } = await db.run(
        `UPDATE ${table}_leases SET owner = ?, until_ms = ? WHERE chain = ? AND (owner = ? OR until_ms < ?)`,
        [owner, now + leaseMs, chain, owner, now],
      );
      return changes === 1;
    },
    release: (owner: string) => db.run(`UPDATE ${table}_leases SET until_ms = 0 WHERE owner = ?`, [owner]),
  };
}

export type ChainOutboxStore = ReturnType<typeof createChainOutboxStore>;
