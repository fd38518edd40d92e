/**
 * Session events (spec §6) and the gateway's audit trail, written in the transaction of the
 * change they record: each session or payment change writes one audit entry and, for the event
 * types a session's `webhookUrl` receives, one row to the webhook outbox `gw_webhook_dispatches`
 * (service-kit webhook-outbox.ts: signed the Standard Webhooks way, retried with backoff by any
 * instance, dead-lettered after the last attempt, the same `webhook-id` throughout; a continuation
 * token is kept there without its MAC and completed at each attempt). Only the
 * transaction whose conditional UPDATE made the change writes them, so two instances never
 * record one change twice.
 *
 * Every payment is audited, so entries are staged (`gw_audit_log_staged`, no lock) in the
 * change's transaction and sealed into the hash chain `gw_audit_log` right after the commit, a
 * batch per transaction under the chain's lock in the database (any instance; one at a time):
 * appending under the lock inside each payment's transaction would make payments commit one at
 * a time across all instances.
 */
import {
  createAuditLog,
  createWebhookOutbox,
  insertRow,
  signWebhook,
  type AuditLog,
  type RowInsert,
  type SqlDatabase,
  type SqlExecutor,
  type TxEffect,
  type WebhookOutbox,
  type WebhookOutboxOptions,
  type WebhookRetrySettings,
} from '../../service-kit/index.js';
import type { SessionRecord } from './store.js';
import type { TransparencyLog } from '../../service-kit/tlog/index.js';
import { continuationToken } from './continuation.js';
import { gatewayLogRows } from '../log/entries.js';

/** The event types delivered to a session's webhookUrl. */
export type GatewayEventType =
  | 'payment.completed'
  | 'payment.denied'
  | 'session.threshold_crossed'
  | 'session.paused'
  | 'session.revoked'
  | 'session.expired'
  /** A payment's commit filled a window of the session (PROTOCOL.md §13); `resetsAt` names its end. */
  | 'window.exhausted'
  /** A merchant reported a settlement the chain contradicts (payments/evm/settled.ts); names the merchant. */
  | 'payment.settlement_mismatch';

/** Changes recorded in the audit trail only. */
export type GatewayAuditOnly = 'session.created' | 'session.continued';

const WEBHOOK_TYPES = new Set<string>([
  'payment.completed',
  'payment.denied',
  'session.threshold_crossed',
  'session.paused',
  'session.revoked',
  'session.expired',
  'window.exhausted',
  'payment.settlement_mismatch',
]);

/** Bearer secrets an event may carry to the owner's webhook, never into the audit log. */
const NOT_AUDITED = ['continuationToken'];

/**
 * What the webhook dispatch log keeps of a continuation token (`ctn_<nonce>.<mac>`, continuation.ts):
 * `ctn_<nonce>` alone, which continues nothing without the MAC. The delivery makes the MAC again
 * with the continuation HMAC key (sealed, gateway/README.md "Secrets at rest") and signs the
 * completed body, so the receiver gets the token and the log never holds it.
 */
const WITHHELD = /^ctn_[A-Za-z0-9_-]{16,64}$/;
const withheld = (data: Record<string, unknown>): Record<string, unknown> =>
  typeof data.continuationToken === 'string'
    ? { ...data, continuationToken: data.continuationToken.split('.')[0] }
    : data;

export type EventSession = Pick<SessionRecord, 'id' | 'webhookUrl'>;

export interface GatewayEvent {
  session: EventSession;
  type: GatewayEventType | GatewayAuditOnly;
  data: Record<string, unknown>;
  /** Who made the change: 'owner', 'admin', 'agent', 'system'. */
  actor: string;
  /** payment.completed: the signed receipt, appended to the transparency log with the change (log/entries.ts). */
  receipt?: { receiptId: string };
}

export interface GatewayEvents {
  /**
   * The effect that records a store change in its transaction: the events `of(result, q)` (none:
   * nothing recorded). After the commit the outbox is woken and `onEvent` told.
   */
  effect<R>(of: (result: R, q: SqlExecutor) => GatewayEvent[] | Promise<GatewayEvent[]>): TxEffect<R>;
  /**
   * The rows that record `events` (outbox deliveries, staged audit entries), to fold into the
   * change's own statement (PostgreSQL payments), and what to run once it committed.
   */
  rows(events: GatewayEvent[]): { rows: RowInsert[]; after: () => void };
  /** The effect that records an admin change (owners, their keys) in its transaction: an audit entry, no webhook. */
  entry<R>(
    actor: string,
    action: string,
    subject: string,
    data: Record<string, unknown>,
    when?: (result: R) => boolean,
  ): TxEffect<R>;
  /** An event that records no change (payment.denied): its delivery alone, in a transaction of its own. */
  emit(session: EventSession, type: GatewayEventType, data: Record<string, unknown>): Promise<void>;
  readonly audit: AuditLog;
  readonly outbox: WebhookOutbox;
  /**
   * Rewrites dispatch rows that hold a whole continuation token (written before tokens were withheld) to the withheld
   * form; resolves to the rows rewritten.
   */
  withholdLoggedTokens(): Promise<number>;
  /** Starts the outbox's deliveries and the timer that seals other instances' staged entries; `close()` stops both. */
  start(): void;
  /** Resolves when every staged entry is sealed and no delivery is pending (each delivered or dead-lettered). */
  idle(): Promise<void>;
  close(): Promise<void>;
}

export interface EventOptions extends WebhookRetrySettings {
  db: SqlDatabase;
  fetch?: typeof fetch;
  now: () => number;
  onError?: (e: unknown) => void;
  /** Told each webhook attempt's recorded outcome (metrics). */
  onDelivery?: WebhookOutboxOptions['onDelivery'];
  /** Also told of every event once committed (metrics, tests). */
  onEvent?: (type: GatewayEventType, data: Record<string, unknown>) => void;
  /** The continuation HMAC key: completes the continuation tokens the dispatch log withholds, at delivery. */
  continuationSecret: Buffer;
  /** The transparency log the logged events append to, in their change's transaction (log/entries.ts). */
  log?: TransparencyLog;
}

export const GATEWAY_AUDIT_TABLE = 'gw_audit_log';
/** How long after a commit its staged audit entries are sealed (the batching window). */
const SEAL_DELAY_MS = 20;
export const GATEWAY_DISPATCH_TABLE = 'gw_webhook_dispatches';

export function createGatewayEvents(options: EventOptions): GatewayEvents {
  const { db, now } = options;
  const audit = createAuditLog(db, GATEWAY_AUDIT_TABLE);
  const webhookSecret = async (sessionId: string) =>
    (
      await db.get<{ webhook_secret: string | null }>(`SELECT webhook_secret FROM gw_sessions WHERE id = ?`, [
        sessionId,
      ])
    )?.webhook_secret ?? undefined;
  const send = options.fetch ?? fetch;
  const outbox = createWebhookOutbox({
    ...options,
    db,
    table: GATEWAY_DISPATCH_TABLE,
    // The target is the session id: its secret is read at each attempt (never copied into the outbox).
    resolve: async (sessionId) => {
      const secret = await webhookSecret(sessionId);
      return secret ? { secret } : undefined;
    },
    // A body whose continuation token the log withholds is completed and signed again here.
    fetch: (async (url: string | URL | Request, init: RequestInit = {}) => {
      const completed = typeof init.body === 'string' ? await completeToken(init.body) : undefined;
      if (!completed) return send(url, init);
      const headers = new Headers(init.headers);
      const signed = signWebhook(
        completed.secret,
        headers.get('webhook-id') ?? '',
        Number(headers.get('webhook-timestamp')),
        completed.body,
      );
      for (const [k, v] of Object.entries(signed)) headers.set(k, v);
      return send(url, { ...init, headers, body: completed.body });
    }) as typeof fetch,
  });

  /** The delivered body of a logged one with a withheld continuation token, and the secret that signs it. */
  async function completeToken(body: string): Promise<{ body: string; secret: string } | undefined> {
    if (!body.includes('"continuationToken"')) return undefined;
    const parsed = JSON.parse(body) as { data?: Record<string, unknown> };
    const d = parsed.data;
    if (
      !d ||
      typeof d.sessionId !== 'string' ||
      typeof d.continuationToken !== 'string' ||
      !WITHHELD.test(d.continuationToken)
    )
      return undefined;
    const secret = await webhookSecret(d.sessionId);
    if (!secret) return undefined;
    d.continuationToken = continuationToken(
      options.continuationSecret,
      d.sessionId,
      d.continuationToken.slice('ctn_'.length),
    );
    return { body: JSON.stringify(parsed), secret };
  }
  // The sealer: after each commit that staged entries, and every second for other instances'.
  let sealing: Promise<void> | undefined;
  let sealAgain = false;
  let closed = false;
  const sealNow = (): Promise<void> => {
    if (sealing) {
      sealAgain = true;
      return sealing;
    }
    sealing = (async () => {
      try {
        do {
          sealAgain = false;
          if ((await audit.seal()) === 500) sealAgain = true;
        } while (sealAgain && !closed);
      } catch (e) {
        options.onError?.(e);
      } finally {
        sealing = undefined;
      }
    })();
    return sealing;
  };
  let sealTimer: ReturnType<typeof setInterval> | undefined;
  // After a commit: a seal soon, one for all the commits of the next few milliseconds (a batch
  // per transaction, not a transaction per payment).
  let sealSoon: ReturnType<typeof setTimeout> | undefined;
  const kickSeal = () => {
    if (sealSoon || closed) return;
    sealSoon = setTimeout(() => {
      sealSoon = undefined;
      void sealNow();
    }, SEAL_DELAY_MS);
    sealSoon.unref?.();
  };

  const deliver = (
    q: SqlExecutor,
    e: Pick<GatewayEvent, 'session' | 'type'>,
    payload: Record<string, unknown>,
    at: number,
  ) =>
    e.session.webhookUrl && WEBHOOK_TYPES.has(e.type)
      ? outbox.enqueue(q, { type: e.type, data: withheld(payload), at }, [
          { url: e.session.webhookUrl, target: e.session.id },
        ])
      : Promise.resolve(undefined);

  const told = (list: Array<{ type: string; payload: Record<string, unknown> }>, delivered: boolean) => () => {
    kickSeal();
    options.log?.kick();
    if (delivered) outbox.kick();
    for (const { type, payload } of list)
      if (WEBHOOK_TYPES.has(type)) options.onEvent?.(type as GatewayEventType, payload);
  };

  const self: GatewayEvents = {
    audit,
    outbox,
    effect(of) {
      return async (q, result) => {
        const events = await of(result, q);
        if (events.length === 0) return undefined;
        const { rows, after } = self.rows(events);
        for (const r of rows) await insertRow(q, r);
        return after;
      };
    },
    rows(events) {
      const at = now();
      const rows: RowInsert[] = [];
      const done: Array<{ type: string; payload: Record<string, unknown> }> = [];
      let delivered = false;
      for (const e of events) {
        const payload = { sessionId: e.session.id, ...e.data };
        if (e.session.webhookUrl && WEBHOOK_TYPES.has(e.type)) {
          rows.push(
            ...outbox.rows({ type: e.type, data: withheld(payload), at }, [
              { url: e.session.webhookUrl, target: e.session.id },
            ]).rows,
          );
          delivered = true;
        }
        const audited: Record<string, unknown> = { ...payload };
        for (const k of NOT_AUDITED) delete audited[k];
        rows.push(
          audit.stagedRow({
            actor: e.actor,
            action: e.type,
            subject: e.session.id,
            data: audited,
            at: new Date(at).toISOString(),
          }),
        );
        rows.push(...gatewayLogRows(options.log, { ...e, data: audited }, at));
        done.push({ type: e.type, payload });
      }
      return { rows, after: told(done, delivered) };
    },
    entry(actor, action, subject, data, when) {
      return async (q, result) => {
        if (when && !when(result)) return undefined;
        await audit.stage({ actor, action, subject, data, at: new Date(now()).toISOString() }, q);
        return kickSeal;
      };
    },
    async emit(session, type, data) {
      const payload = { sessionId: session.id, ...data };
      if (session.webhookUrl) await db.tx((q) => deliver(q, { session, type }, payload, now()));
      told([{ type, payload }], !!session.webhookUrl)();
    },
    async withholdLoggedTokens() {
      const rows = await db.all<{ id: string; body: string }>(
        `SELECT id, body FROM ${GATEWAY_DISPATCH_TABLE} WHERE event_type = 'session.paused' AND body LIKE ?`,
        ['%"continuationToken":"ctn%'],
      );
      let n = 0;
      for (const r of rows) {
        let parsed: { data?: Record<string, unknown> };
        try {
          parsed = JSON.parse(r.body);
        } catch {
          continue;
        }
        if (
          !parsed.data ||
          typeof parsed.data.continuationToken !== 'string' ||
          !parsed.data.continuationToken.includes('.')
        )
          continue;
        parsed.data = withheld(parsed.data);
        // Conditional on the body read: a row another instance rewrote meanwhile is left as it is.
        n += (
          await db.run(`UPDATE ${GATEWAY_DISPATCH_TABLE} SET body = ? WHERE id = ? AND body = ?`, [
            JSON.stringify(parsed),
            r.id,
            r.body,
          ])
        ).changes;
      }
      return n;
    },
    start() {
      if (sealTimer || closed) return;
      outbox.start();
      sealTimer = setInterval(() => void sealNow(), options.pollMs ?? 1000);
      sealTimer.unref?.();
    },
    async idle() {
      await sealNow();
      await outbox.idle();
    },
    async close() {
      closed = true;
      clearInterval(sealTimer);
      clearTimeout(sealSoon);
      await sealing;
      await outbox.close();
    },
  };
  return self;
}
