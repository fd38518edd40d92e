/**
 * Durable webhook deliveries (spec §6 "A dispatch log records webhook deliveries"): an outbox
 * table, written in the transaction of the event it delivers, drained by every instance.
 *
 * - One row per event and endpoint, inserted by `enqueue(q, …)` inside the caller's transaction:
 *   an event that commits is delivered, one that rolls back never is.
 * - Each row keeps the `webhook-id` it was given at enqueue through every attempt, instance and
 *   restart (at-least-once: a receiver de-duplicates on it). Every attempt is signed afresh the
 *   Standard Webhooks way (webhook-signature.ts) with the attempt's own timestamp.
 * - Any instance claims due rows with a lease (one conditional UPDATE; `FOR UPDATE SKIP LOCKED`
 *   on PostgreSQL), so a row is attempted by one instance at a time, and a row whose instance
 *   died is taken over when its lease runs out.
 * - Failures are retried with exponential backoff (plus up to 25 % jitter) up to `maxAttempts`,
 *   then dead-lettered: status `failed`, kept in the table (the dispatch log) with the last
 *   status and error, and redelivered only on request (`redeliver`), with the same id.
 */
import { randomBytes } from 'node:crypto';
import type { SqlDatabase, SqlExecutor } from './database.js';
import type { Migration } from './migrate.js';
import { checkTableName } from './audit-log.js';
import { signWebhook } from './webhook-signature.js';
import { insertRow, type RowInsert } from './row-insert.js';

/** `pending` (waiting or being attempted), `delivered`, or `failed` (dead letter: attempts exhausted). */
export type DispatchStatus = 'pending' | 'delivered' | 'failed';

export interface DispatchRecord {
  id: string;
  /** the `webhook-id`, the same for every attempt (receivers de-duplicate on it) */
  messageId: string;
  endpoint: string;
  eventType: string;
  body: string;
  status: DispatchStatus;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: string;
  updatedAt: string;
  /** When a pending delivery is next due (ISO), else null. */
  nextAttemptAt: string | null;
}

/** The dispatch log: the outbox read back. */
export interface DispatchLog {
  list(options?: { status?: DispatchStatus; limit?: number }): Promise<DispatchRecord[]>;
}

/** The dispatch log table (first version); `webhookOutboxMigration` makes it the outbox. */
export function dispatchLogMigration(table = 'webhook_dispatches'): Migration {
  checkTableName(table);
  return {
    id: `service-kit-${table}-001`,
    sql: `CREATE TABLE ${table} (
      id TEXT PRIMARY KEY,
      message_id TEXT NOT NULL,
      endpoint TEXT NOT NULL,
      event_type TEXT NOT NULL,
      body TEXT NOT NULL,
      status TEXT NOT NULL,
      attempts INTEGER NOT NULL,
      last_status INTEGER,
      last_error TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    );
    CREATE INDEX ${table}_status ON ${table} (status, created_at)`,
  };
}

/**
 * The outbox columns on the dispatch log table: `target` (what the service resolves to the
 * endpoint's secret), `next_attempt_ms`, and the lease (`lease_until_ms`, `lease_owner`). Rows a
 * pre-outbox dispatcher left pending stay pending and are delivered (their target is their URL).
 */
export function webhookOutboxMigration(table = 'webhook_dispatches'): Migration {
  checkTableName(table);
  return {
    id: `service-kit-${table}-002-outbox`,
    sql: `ALTER TABLE ${table} ADD COLUMN target TEXT;
    ALTER TABLE ${table} ADD COLUMN next_attempt_ms BIGINT;
    ALTER TABLE ${table} ADD COLUMN lease_until_ms BIGINT;
    ALTER TABLE ${table} ADD COLUMN lease_owner TEXT;
    UPDATE ${table} SET target = endpoint, next_attempt_ms = 0 WHERE status = 'pending';
    CREATE INDEX ${table}_due ON ${table} (status, next_attempt_ms)`,
  };
}

type Row = {
  id: string;
  message_id: string;
  endpoint: string;
  event_type: string;
  body: string;
  status: DispatchStatus;
  attempts: number | string;
  last_status: number | string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  target: string | null;
  next_attempt_ms: number | string | null;
};

const toRecord = (r: Row): DispatchRecord => ({
  id: r.id,
  messageId: r.message_id,
  endpoint: r.endpoint,
  eventType: r.event_type,
  body: r.body,
  status: r.status,
  attempts: Number(r.attempts),
  lastStatus: r.last_status == null ? null : Number(r.last_status),
  lastError: r.last_error,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  nextAttemptAt:
    r.status === 'pending' && r.next_attempt_ms != null ? new Date(Number(r.next_attempt_ms)).toISOString() : null,
});

/**
 * @example const log = createSqlDispatchLog(db) (after migrate(db, [dispatchLogMigration(), webhookOutboxMigration()]))
 */
export function createSqlDispatchLog(db: SqlDatabase, table = 'webhook_dispatches'): DispatchLog {
  checkTableName(table);
  return {
    async list(options = {}) {
      const limit = Math.min(Math.max(1, options.limit ?? 100), 1000);
      const rows = options.status
        ? await db.all<Row>(`SELECT * FROM ${table} WHERE status = ? ORDER BY created_at, id LIMIT ?`, [
            options.status,
            limit,
          ])
        : await db.all<Row>(`SELECT * FROM ${table} ORDER BY created_at, id LIMIT ?`, [limit]);
      return rows.map(toRecord);
    },
  };
}

/** Where one delivery goes: `url` is posted to; `target` is stored and resolved to the secret at each attempt. */
export interface OutboxEndpoint {
  url: string;
  target: string;
}

export interface OutboxEvent {
  type: string;
  data: unknown;
  /** ms; default now() */
  at?: number;
}

export interface WebhookRetrySettings {
  /** Attempts per delivery including the first, then dead letter (default 12). */
  maxAttempts?: number;
  /** Delay before the second attempt; doubles each time (default 5000). */
  baseDelayMs?: number;
  /** Longest delay between attempts (default 3 600 000: the default schedule spans about 2.5 hours). */
  maxDelayMs?: number;
  /** Per-attempt timeout (default 5000). */
  timeoutMs?: number;
  /** How often an instance looks for due rows besides being woken (default 1000). */
  pollMs?: number;
}

export interface WebhookOutboxOptions extends WebhookRetrySettings {
  db: SqlDatabase;
  table?: string;
  /** The secret for a row's target; undefined dead-letters the row (the endpoint is gone). */
  resolve(target: string): Promise<{ secret: string } | undefined> | { secret: string } | undefined;
  fetch?: typeof fetch;
  /** A claimed row is this instance's for this long (default timeoutMs + 10 000). */
  leaseMs?: number;
  /** Rows claimed per pass (default 16). */
  batch?: number;
  now?: () => number;
  onError?: (e: unknown) => void;
  /** Told each attempt's recorded outcome (metrics): delivered, retry (pending again) or dead_letter. */
  onDelivery?: (outcome: DeliveryOutcome) => void;
}

export type DeliveryOutcome = 'delivered' | 'retry' | 'dead_letter';

export interface WebhookOutbox {
  /**
   * Inside the event's transaction: one row per endpoint, all with one new `webhook-id` (returned;
   * undefined when there is no endpoint). Call `kick()` after the commit.
   */
  enqueue(q: SqlExecutor, event: OutboxEvent, endpoints: OutboxEndpoint[]): Promise<string | undefined>;
  /** The rows `enqueue` writes, to fold into the event's own statement (row-insert.ts). */
  rows(event: OutboxEvent, endpoints: OutboxEndpoint[]): { messageId: string; rows: RowInsert[] };
  /** Starts draining: a pass now, then every `pollMs` and on each kick. */
  start(): void;
  /** A pass soon (after a commit that enqueued). */
  kick(): void;
  /** One pass: claims due rows and attempts them; resolves to the number attempted. */
  runOnce(): Promise<number>;
  /** Resolves when no row is pending (each delivered or dead-lettered), or when closed (tests, shutdown). */
  idle(): Promise<void>;
  /** A dead letter back to pending, attempts reset, same `webhook-id`; false when not dead. */
  redeliver(id: string): Promise<boolean>;
  /** Stops claiming; attempts in flight finish (their rows stay pending if they fail). */
  close(): Promise<void>;
  readonly log: DispatchLog;
}

/** Retry settings from `CTL_WEBHOOK_MAX_ATTEMPTS`, `…_BASE_DELAY_MS`, `…_MAX_DELAY_MS`, `…_TIMEOUT_MS`, `…_POLL_MS`. */
export function webhookRetryFromEnv(env: Record<string, string | undefined>): WebhookRetrySettings {
  const out: WebhookRetrySettings = {};
  const names = {
    maxAttempts: 'MAX_ATTEMPTS',
    baseDelayMs: 'BASE_DELAY_MS',
    maxDelayMs: 'MAX_DELAY_MS',
    timeoutMs: 'TIMEOUT_MS',
    pollMs: 'POLL_MS',
  } as const;
  for (const [k, suffix] of Object.entries(names) as Array<[keyof WebhookRetrySettings, string]>) {
    const v = env[`CTL_WEBHOOK_${suffix}`];
    if (v === undefined || v === '') continue;
    if (!/^[1-9][0-9]{0,9}$/.test(v))
      throw new RangeError(`CTL_WEBHOOK_${suffix}: a positive integer, got '${v.slice(0, 20)}'`);
    out[k] = Number(v);
  }
  return out;
}

/**
 * @example
 * const outbox = createWebhookOutbox({ db, resolve: (url) => ({ secret }) }); outbox.start()
 * await db.tx(async (q) => { await change(q); await outbox.enqueue(q, { type: 'x.y', data }, [{ url, target: url }])
 * }); outbox.kick()
 */
export function createWebhookOutbox(options: WebhookOutboxOptions): WebhookOutbox {
  const { db } = options;
  const table = options.table ?? 'webhook_dispatches';
  checkTableName(table);
  const doFetch = options.fetch ?? fetch;
  const now = options.now ?? Date.now;
  const maxAttempts = options.maxAttempts ?? 12;
  const base = options.baseDelayMs ?? 5000;
  const cap = options.maxDelayMs ?? 3_600_000;
  const timeoutMs = options.timeoutMs ?? 5000;
  const leaseMs = options.leaseMs ?? timeoutMs + 10_000;
  const pollMs = options.pollMs ?? 1000;
  const batch = options.batch ?? 16;
  const owner = `i_${randomBytes(9).toString('base64url')}`;
  const report = (e: unknown) => options.onError?.(e);
  let closed = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let started = false;
  let running: Promise<number> | undefined;
  let again = false;

  /** Delay after `attempts` failed attempts: base·2^(n−1), capped, plus up to 25 % jitter. */
  const backoff = (attempts: number) => {
    const d = Math.min(cap, base * 2 ** Math.min(attempts - 1, 40));
    return Math.round(d + Math.random() * d * 0.25);
  };

  const claimSql =
    db.dialect === 'postgres'
      ? `UPDATE ${table} SET lease_until_ms = ?, lease_owner = ? WHERE id IN (
           SELECT id FROM ${table} WHERE status = 'pending' AND next_attempt_ms <= ? AND (lease_until_ms IS NULL OR
           lease_until_ms < ?)
           ORDER BY next_attempt_ms LIMIT ? FOR UPDATE SKIP LOCKED)
         AND status = 'pending' AND (lease_until_ms IS NULL OR lease_until_ms < ?) RETURNING *`
      : `UPDATE ${table} SET lease_until_ms = ?, lease_owner = ? WHERE id IN (
           SELECT id FROM ${table} WHERE status = 'pending' AND next_attempt_ms <= ? AND (lease_until_ms IS NULL OR
           lease_until_ms < ?)
           ORDER BY next_attempt_ms LIMIT ?)
         AND status = 'pending' AND (lease_until_ms IS NULL OR lease_until_ms < ?) RETURNING *`;

  /** Records an attempt's outcome, only while this instance still holds the row's lease. */
  async function settle(
    r: Row,
    attempts: number,
    outcome: { delivered: boolean; lastStatus: number | null; lastError: string | null; dead?: boolean },
  ) {
    const t = now();
    const status: DispatchStatus = outcome.delivered
      ? 'delivered'
      : outcome.dead || attempts >= maxAttempts
        ? 'failed'
        : 'pending';
    const done = await db.run(
      `UPDATE ${table} SET status = ?, attempts = ?, last_status = ?, last_error = ?, updated_at = ?,
        next_attempt_ms = ?,
         lease_until_ms = NULL, lease_owner = NULL
       WHERE id = ? AND lease_owner = ? AND status = 'pending'`,
      [
        status,
        attempts,
        outcome.lastStatus,
        outcome.lastError,
        new Date(t).toISOString(),
        status === 'pending' ? t + backoff(attempts) : null,
        r.id,
        owner,
      ],
    );
    // Counted only when recorded: a lost lease means another instance owns the row now.
    if (done.changes > 0)
      options.onDelivery?.(status === 'delivered' ? 'delivered' : status === 'failed' ? 'dead_letter' : 'retry');
  }

  async function attempt(r: Row): Promise<void> {
    const attempts = Number(r.attempts) + 1;
    let endpoint: { secret: string } | undefined;
    try {
      endpoint = r.target == null ? undefined : await options.resolve(r.target);
    } catch (e) {
      return settle(r, attempts, {
        delivered: false,
        lastStatus: null,
        lastError: `endpoint lookup failed: ${(e as Error)?.message ?? e}`,
      });
    }
    if (!endpoint)
      return settle(r, attempts, {
        delivered: false,
        lastStatus: null,
        lastError: 'the endpoint is no longer configured',
        dead: true,
      });
    let lastStatus: number | null = null;
    let lastError: string | null = null;
    try {
      const headers = signWebhook(endpoint.secret, r.message_id, Math.floor(now() / 1000), r.body);
      const res = await doFetch(r.endpoint, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: r.body,
        redirect: 'manual',
        signal: AbortSignal.timeout(timeoutMs),
      });
      lastStatus = res.status;
      await res.body?.cancel().catch(() => {});
      if (res.status >= 200 && res.status < 300)
        return settle(r, attempts, { delivered: true, lastStatus, lastError: null });
      lastError = `HTTP ${res.status}`;
    } catch (e) {
      lastError = (e instanceof Error ? e.message : String(e)).slice(0, 500);
    }
    return settle(r, attempts, { delivered: false, lastStatus, lastError });
  }

  async function pass(): Promise<number> {
    const t = now();
    const claimed = await db.all<Row>(claimSql, [t + leaseMs, owner, t, t, batch, t]);
    await Promise.all(claimed.map((r) => attempt(r).catch(report)));
    return claimed.length;
  }

  /** One pass at a time per instance; a kick during a pass runs another after it. */
  function runOnce(): Promise<number> {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      let total = 0;
      try {
        do {
          again = false;
          const n = await pass();
          total += n;
          if (n === batch) again = true; // more may be due
        } while (again && !closed);
      } finally {
        running = undefined;
      }
      return total;
    })();
    return running;
  }

  function schedule(ms: number) {
    if (closed || !started) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      runOnce()
        .catch(report)
        .finally(() => schedule(pollMs));
    }, ms);
    timer.unref?.();
  }

  return {
    log: createSqlDispatchLog(db, table),
    rows(event, endpoints) {
      const messageId = `msg_${randomBytes(16).toString('base64url')}`;
      const at = event.at ?? now();
      const body = JSON.stringify({ type: event.type, timestamp: new Date(at).toISOString(), data: event.data });
      const iso = new Date(now()).toISOString();
      return {
        messageId,
        rows: endpoints.map((e) => ({
          table,
          values: {
            id: `${messageId}:${randomBytes(6).toString('base64url')}`,
            message_id: messageId,
            endpoint: e.url,
            event_type: event.type,
            body,
            status: 'pending',
            attempts: 0,
            created_at: iso,
            updated_at: iso,
            target: e.target,
            next_attempt_ms: at,
          },
          bigint: ['attempts', 'next_attempt_ms'],
        })),
      };
    },
    async enqueue(q, event, endpoints) {
      if (endpoints.length === 0) return undefined;
      const { messageId, rows } = this.rows(event, endpoints);
      for (const r of rows) await insertRow(q, r);
      return messageId;
    },
    start() {
      if (started || closed) return;
      started = true;
      schedule(0);
    },
    kick() {
      schedule(0);
    },
    runOnce,
    async idle() {
      while (!closed) {
        await runOnce();
        const next = await db.get<{ n: number | string | null }>(
          `SELECT MIN(next_attempt_ms) AS n FROM ${table} WHERE status = 'pending'`,
        );
        if (next?.n == null) return;
        const wait = Math.max(5, Math.min(Number(next.n) - now(), pollMs));
        await new Promise((r) => setTimeout(r, wait));
      }
    },
    async redeliver(id) {
      const iso = new Date(now()).toISOString();
      const { changes } = await db.run(
        `UPDATE ${table} SET status = 'pending', attempts = 0, next_attempt_ms = ?, updated_at = ?,
          lease_until_ms = NULL, lease_owner = NULL
         WHERE id = ? AND status = 'failed'`,
        [now(), iso, id],
      );
      if (changes === 1) schedule(0);
      return changes === 1;
    },
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      await running?.catch(() => {});
    },
  };
}
