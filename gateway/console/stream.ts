/**
 * The console's live feed: Server-Sent Events per budget owner (GET /console/events). Each event
 * says *what* changed (`payment.completed` on session X); the browser reads the new state through
 * the owner API, so the stream never carries more than the API would show, and a missed event
 * costs nothing but a refresh (`resync`).
 *
 * Bounded: at most `maxPerOwner` streams per owner and `maxTotal` per instance (429
 * `rate_limited` beyond), a heartbeat every `heartbeatMs` that also re-checks the API key (a key
 * revoked or an owner disabled ends its streams within one beat), a maximum lifetime after which
 * the browser reconnects, and an end as soon as the HTTP server stops listening (so a graceful
 * `server.close()` is not held open by a console tab).
 *
 * Several instances on one PostgreSQL: every event is also sent with NOTIFY on CONSOLE_CHANNEL
 * and every instance LISTENs, so a stream on instance B sees a payment made on instance A within
 * the notification's latency. When the listening connection is lost or comes back, every stream
 * gets `resync` (what was missed is unknown). SQLite is one instance per file: local only.
 */
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Server } from 'node:net';
import type { Context } from 'koa';
import type { SqlDatabase } from '../../service-kit/index.js';

export const CONSOLE_CHANNEL = 'ctl_gw_console';
const MAX_BUFFERED_BYTES = 256 * 1024;

/** Members of an event the console may see; anything else (a continuation token) stays out. */
const SAFE_FIELDS = [
  'amountMinor',
  'currency',
  'merchant',
  'purpose',
  'receiptId',
  'code',
  'threshold',
  'revokedBy',
  'reason',
] as const;

export interface ConsoleEvent {
  type: string;
  sessionId: string;
  at: string;
  [field: string]: unknown;
}

export interface ConsoleStreamOptions {
  db: SqlDatabase;
  /** Re-checks the key a stream was opened with; undefined or another owner ends the stream. */
  ownerOfKey: (apiKey: string) => Promise<string | undefined>;
  now?: () => number;
  maxPerOwner?: number;
  maxTotal?: number;
  heartbeatMs?: number;
  maxLifetimeMs?: number;
  onError?: (e: unknown) => void;
}

interface Stream {
  ownerId: string;
  apiKey: string;
  out: ServerResponse;
  server: Server | null;
  openedAt: number;
  lastBeat: number;
  checking: boolean;
}

export interface ConsoleStreams {
  /** Takes over `ctx`'s response as an event stream for `ownerId`, or names the cap that is reached. */
  open(ctx: Context, ownerId: string, apiKey: string): 'open' | 'owner_cap' | 'instance_cap';
  /** A gateway event (webhook events, and session creation/continuation); resolved to its owner. */
  publish(type: string, data: Record<string, unknown>): void;
  /** `notify`: cross-instance via LISTEN/NOTIFY and listening now; `local`: this instance only. */
  readonly mode: 'notify' | 'local';
  readonly count: number;
  close(): Promise<void>;
}

export function createConsoleStreams(o: ConsoleStreamOptions): ConsoleStreams {
  const now = o.now ?? Date.now;
  const maxPerOwner = o.maxPerOwner ?? 4;
  const maxTotal = o.maxTotal ?? 1000;
  const heartbeatMs = o.heartbeatMs ?? 15_000;
  const maxLifetimeMs = o.maxLifetimeMs ?? 30 * 60_000;
  const instance = randomBytes(9).toString('base64url');
  const streams = new Set<Stream>();
  // A session's owner never changes: a bounded memo saves a read per event.
  const owners = new Map<string, string>();
  let listening = false;
  let closed = false;
  let sweep: ReturnType<typeof setInterval> | undefined;

  const write = (s: Stream, text: string) => {
    if (s.out.writableEnded || s.out.destroyed) return;
    // A client that stops reading would make the instance buffer its events without bound: cut
    // it off (it reconnects and reloads, as after any gap).
    if (s.out.writableLength > MAX_BUFFERED_BYTES) return void end(s);
    s.out.write(text);
  };
  const send = (s: Stream, event: string, data: unknown) =>
    write(s, `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  const end = (s: Stream, reason?: string) => {
    if (!streams.delete(s)) return;
    if (reason && !s.out.destroyed) s.out.write(`event: end\ndata: ${JSON.stringify({ reason })}\n\n`);
    s.out.end();
    if (streams.size === 0 && sweep) {
      clearInterval(sweep);
      sweep = undefined;
    }
  };
  const broadcast = (event: string, data: unknown, ownerId?: string) => {
    for (const s of streams) if (ownerId === undefined || s.ownerId === ownerId) send(s, event, data);
  };

  const subscription = o.db.listen?.(CONSOLE_CHANNEL, {
    notify(payload) {
      let n: { i?: unknown; o?: unknown; e?: unknown; b?: unknown };
      try {
        n = JSON.parse(payload);
      } catch {
        return broadcast('resync', { reason: 'unreadable notification' });
      }
      if (n.i === instance) return;
      // One notification carries the events of one publishing turn (`b`), or one event.
      for (const x of Array.isArray(n.b) ? (n.b as { o?: unknown; e?: unknown }[]) : [n]) {
        if (x && typeof x.o === 'string' && typeof x.e === 'object' && x.e !== null) broadcast('session', x.e, x.o);
      }
    },
    state(up) {
      // Up again after a loss, or lost: notifications may have been missed either way.
      if (listening !== up) broadcast('resync', { reason: up ? 'listening again' : 'listener lost' });
      listening = up;
    },
  });

  // The events published in one turn go out as one NOTIFY (one round trip, not one per payment),
  // each notification under PostgreSQL's 8000-byte payload limit.
  let outgoing: string[] = [];
  const NOTIFY_BYTES = 7000;
  function notifyLater(ownerId: string, e: ConsoleEvent) {
    if (outgoing.length === 0) setImmediate(flushNotifications);
    outgoing.push(JSON.stringify({ o: ownerId, e }));
  }
  function flushNotifications() {
    const items = outgoing;
    outgoing = [];
    let batch: string[] = [];
    let size = 0;
    const send = () => {
      const payload = `{"i":${JSON.stringify(instance)},"b":[${batch.join(',')}]}`;
      o.db.get(`SELECT pg_notify(?, ?) AS sent`, [CONSOLE_CHANNEL, payload]).catch((err) => o.onError?.(err));
      batch = [];
      size = 0;
    };
    for (const item of items) {
      if (batch.length && size + item.length > NOTIFY_BYTES) send();
      batch.push(item);
      size += item.length + 1;
    }
    if (batch.length) send();
  }

  async function ownerOfSession(sessionId: string): Promise<string | undefined> {
    const hit = owners.get(sessionId);
    if (hit) return hit;
    const row = await o.db.get<{ owner_id: string }>(`SELECT owner_id FROM gw_sessions WHERE id = ?`, [sessionId]);
    if (!row) return undefined;
    if (owners.size >= 10_000) owners.delete(owners.keys().next().value as string);
    owners.set(sessionId, row.owner_id);
    return row.owner_id;
  }

  async function tick() {
    const t = now();
    for (const s of [...streams]) {
      if (s.server && !s.server.listening) end(s, 'shutdown');
      else if (t - s.openedAt >= maxLifetimeMs) end(s, 'lifetime');
      else if (t - s.lastBeat >= heartbeatMs && !s.checking) {
        s.lastBeat = t;
        s.checking = true;
        try {
          const owner = await o.ownerOfKey(s.apiKey);
          if (owner !== s.ownerId) end(s, 'unauthorized');
          else write(s, `: heartbeat ${new Date(t).toISOString()}\n\n`);
        } catch (e) {
          o.onError?.(e);
        } finally {
          s.checking = false;
        }
      }
    }
  }

  return {
    get mode() {
      return subscription && listening ? 'notify' : 'local';
    },
    get count() {
      return streams.size;
    },

    open(ctx, ownerId, apiKey) {
      if (closed || streams.size >= maxTotal) return 'instance_cap';
      let mine = 0;
      for (const s of streams) if (s.ownerId === ownerId) mine++;
      if (mine >= maxPerOwner) return 'owner_cap';
      // Written to the socket directly (ctx.respond = false): Koa's pipeline would report every
      // closed tab as a premature-close error.
      const out = ctx.res;
      const s: Stream = {
        ownerId,
        apiKey,
        out,
        server: ctx.req.socket.server,
        openedAt: now(),
        lastBeat: now(),
        checking: false,
      };
      streams.add(s);
      ctx.req.socket.setTimeout(0);
      ctx.req.socket.setNoDelay(true);
      out.on('close', () => end(s));
      ctx.status = 200;
      ctx.respond = false;
      // Connection: close: the socket goes with the stream, so an ended stream never idles in keep-alive.
      out.writeHead(200, {
        'Content-Type': 'text/event-stream; charset=utf-8',
        'Cache-Control': 'no-store',
        'X-Accel-Buffering': 'no',
        Connection: 'close',
      });
      write(s, `retry: 3000\n\n`);
      send(s, 'ready', { mode: this.mode, heartbeatMs, maxLifetimeMs });
      if (!sweep) {
        sweep = setInterval(() => void tick(), Math.min(1000, heartbeatMs));
        sweep.unref?.();
      }
      return 'open';
    },

    publish(type, data) {
      const sessionId = data.sessionId;
      if (closed || typeof sessionId !== 'string') return;
      const e: ConsoleEvent = { type, sessionId, at: new Date(now()).toISOString() };
      for (const k of SAFE_FIELDS) if (data[k] !== undefined && data[k] !== null) e[k] = data[k];
      void ownerOfSession(sessionId)
        .then(async (ownerId) => {
          if (!ownerId) return;
          broadcast('session', e, ownerId);
          if (subscription) notifyLater(ownerId, e);
        })
        .catch((err) => o.onError?.(err));
    },

    async close() {
      closed = true;
      for (const s of [...streams]) end(s, 'shutdown');
      await subscription?.close();
    },
  };
}
