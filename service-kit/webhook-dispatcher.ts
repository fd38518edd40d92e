/**
 * Delivers events to webhook endpoints, signed the Standard Webhooks way, retrying with
 * exponential backoff and recording every delivery in a dispatch log (spec §6 "A dispatch log
 * records webhook deliveries"). Dispatch is fire-and-forget: callers never wait on a receiver.
 */
import { randomBytes } from 'node:crypto';
import type { SqlDatabase } from './database.js';
import type { Migration } from './migrate.js';
import { checkTableName } from './audit-log.js';
import { signWebhook } from './webhook-signature.js';

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
}

/** Where deliveries are recorded. `createSqlDispatchLog` keeps it in the service's database. */
export interface DispatchLog {
  record(r: DispatchRecord): Promise<void>;
  update(id: string, fields: { status: DispatchStatus; attempts: number; lastStatus: number | null; lastError: string | null; updatedAt: string }): Promise<void>;
  list(options?: { status?: DispatchStatus; limit?: number }): Promise<DispatchRecord[]>;
}

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

type Row = {
  id: string; message_id: string; endpoint: string; event_type: string; body: string; status: DispatchStatus;
  attempts: number | string; last_status: number | string | null; last_error: string | null; created_at: string; updated_at: string;
};

/** @example const log = createSqlDispatchLog(db) (after migrate(db, [dispatchLogMigration()])) */
export function createSqlDispatchLog(db: SqlDatabase, table = 'webhook_dispatches'): DispatchLog {
  checkTableName(table);
  return {
    async record(r) {
      await db.run(
        `INSERT INTO ${table} (id, message_id, endpoint, event_type, body, status, attempts, last_status, last_error, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [r.id, r.messageId, r.endpoint, r.eventType, r.body, r.status, r.attempts, r.lastStatus, r.lastError, r.createdAt, r.updatedAt],
      );
    },
    async update(id, f) {
      await db.run(`UPDATE ${table} SET status = ?, attempts = ?, last_status = ?, last_error = ?, updated_at = ? WHERE id = ?`, [
        f.status, f.attempts, f.lastStatus, f.lastError, f.updatedAt, id,
      ]);
    },
    async list(options = {}) {
      const limit = Math.min(Math.max(1, options.limit ?? 100), 1000);
      const rows = options.status
        ? await db.all<Row>(`SELECT * FROM ${table} WHERE status = ? ORDER BY created_at, id LIMIT ?`, [options.status, limit])
        : await db.all<Row>(`SELECT * FROM ${table} ORDER BY created_at, id LIMIT ?`, [limit]);
      return rows.map((r) => ({
        id: r.id, messageId: r.message_id, endpoint: r.endpoint, eventType: r.event_type, body: r.body, status: r.status,
        attempts: Number(r.attempts), lastStatus: r.last_status == null ? null : Number(r.last_status), lastError: r.last_error,
        createdAt: r.created_at, updatedAt: r.updated_at,
      }));
    },
  };
}

export interface WebhookEndpoint {
  url: string;
  /** `whsec_<base64>` */
  secret: string;
}

export interface WebhookDispatcherOptions {
  endpoints: WebhookEndpoint[];
  log: DispatchLog;
  fetch?: typeof fetch;
  /** Attempts per endpoint including the first (default 5). */
  maxAttempts?: number;
  /** Delay before the second attempt; doubles each time, capped by maxDelayMs (defaults 500, 30000). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Per-attempt timeout (default 5000). */
  timeoutMs?: number;
  now?: () => number;
  onError?: (e: unknown) => void;
}

export interface WebhookDispatcher {
  /** Queues `{ type, timestamp, data }` for every endpoint; returns the message id at once. */
  dispatch(eventType: string, data: unknown): string;
  /** Resolves when every queued delivery has finished (delivered or given up). */
  idle(): Promise<void>;
  /** Stops retrying; pending deliveries stay `pending` in the log. */
  close(): void;
}

/**
 * @example const hooks = createWebhookDispatcher({ endpoints: [{ url, secret }], log }); hooks.dispatch('audit.appended', entry)
 */
export function createWebhookDispatcher(options: WebhookDispatcherOptions): WebhookDispatcher {
  const doFetch = options.fetch ?? fetch;
  const now = options.now ?? Date.now;
  const maxAttempts = options.maxAttempts ?? 5;
  const base = options.baseDelayMs ?? 500;
  const cap = options.maxDelayMs ?? 30000;
  const timeoutMs = options.timeoutMs ?? 5000;
  const inflight = new Set<Promise<void>>();
  const sleepers = new Map<ReturnType<typeof setTimeout>, () => void>();
  let closed = false;
  const report = (e: unknown) => options.onError?.(e);
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        sleepers.delete(t);
        resolve();
      }, ms);
      sleepers.set(t, resolve);
    });

  async function deliver(endpoint: WebhookEndpoint, record: DispatchRecord): Promise<void> {
    await options.log.record(record);
    for (let attempt = 1; attempt <= maxAttempts && !closed; attempt++) {
      let lastStatus: number | null = null;
      let lastError: string | null = null;
      try {
        const headers = signWebhook(endpoint.secret, record.messageId, Math.floor(now() / 1000), record.body);
        const res = await doFetch(endpoint.url, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: record.body,
          signal: AbortSignal.timeout(timeoutMs),
        });
        lastStatus = res.status;
        await res.body?.cancel().catch(() => {});
        if (res.status >= 200 && res.status < 300) {
          await options.log.update(record.id, { status: 'delivered', attempts: attempt, lastStatus, lastError, updatedAt: new Date(now()).toISOString() });
          return;
        }
        lastError = `HTTP ${res.status}`;
      } catch (e) {
        lastError = e instanceof Error ? e.message : String(e);
      }
      const final = attempt === maxAttempts;
      await options.log.update(record.id, {
        status: final ? 'failed' : 'pending', attempts: attempt, lastStatus, lastError, updatedAt: new Date(now()).toISOString(),
      });
      if (!final) await sleep(Math.min(cap, base * 2 ** (attempt - 1)));
    }
  }

  return {
    dispatch(eventType, data) {
      const messageId = `msg_${randomBytes(16).toString('base64url')}`;
      const at = now();
      const body = JSON.stringify({ type: eventType, timestamp: new Date(at).toISOString(), data });
      if (closed) return messageId;
      for (const endpoint of options.endpoints) {
        const createdAt = new Date(at).toISOString();
        const record: DispatchRecord = {
          id: `${messageId}:${randomBytes(6).toString('base64url')}`, messageId, endpoint: endpoint.url, eventType, body,
          status: 'pending', attempts: 0, lastStatus: null, lastError: null, createdAt, updatedAt: createdAt,
        };
        const p: Promise<void> = deliver(endpoint, record).catch(report).finally(() => inflight.delete(p));
        inflight.add(p);
      }
      return messageId;
    },
    async idle() {
      while (inflight.size > 0) await Promise.all([...inflight]);
    },
    close() {
      closed = true;
      // Wake the sleepers so their loops see `closed` and finish: idle() then resolves.
      for (const [t, wake] of sleepers) {
        clearTimeout(t);
        wake();
      }
      sleepers.clear();
    },
  };
}
