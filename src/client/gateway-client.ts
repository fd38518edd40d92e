/**
 * The agent-side gateway client (spec §4.4 "Agent-side client"): the budget owner's
 * session API (create, get, list, revoke, receipts, continue) and, for the agent, a
 * `session.fetch()` that goes through the gateway's `/proxy`, so the agent never sees the
 * payment exchange. Portable: no host objects beyond an injectable `fetch` (the host's by default).
 */
import { createLogFollower, type CheckpointStore, type LogFollower } from './log-follower.js';
import { CtlError, CtlBudgetExceededError, isCtlErrorCode, isServiceErrorCode } from '../errors.js';
import { hostFetch, hostSleep } from '../host.js';
import type { BudgetWindow } from '../artifacts/types.js';
import { proxySender, unreachable, type GatewayTransport } from './proxy-send.js';

type Fetch = typeof fetch;

/**
 * A refusal by the gateway itself (not a merchant response): `{ error: { code, message } }` + HTTP
 * status. `receiptId` is set when the answer names a payment that was made (`paid_response_lost`:
 * paid, the merchant's answer lost; sending the call again pays again).
 */
export class GatewayError extends Error {
  readonly code: string;
  readonly status: number;
  readonly receiptId?: string;
  constructor(status: number, code: string, message: string, receiptId?: string) {
    super(message);
    this.name = 'GatewayError';
    this.status = status;
    this.code = code;
    if (receiptId) this.receiptId = receiptId;
  }
}

/**
 * What `onSoftLimit` is told when a payment would cross a soft limit (spec §3 "paused"). `kind`
 * says which: the session's `ceiling` (only the owner's continuation resumes it), or one budget
 * `window` (PROTOCOL.md §13), which resumes by itself at `resetsAt` unless the owner raises it sooner.
 */
export interface SoftLimitInfo {
  sessionId: string | undefined;
  code: 'session_paused';
  kind: 'window' | 'ceiling';
  /** kind `window`: the paused window's period (`PT1H`, `P1D`, …), when the gateway's view names it. */
  every?: string;
  /** kind `window`: when the window ends and payments resume without the owner (RFC 3339 UTC). */
  resetsAt?: string;
  message: string;
  /** The target the agent was calling. */
  url: string;
}

/**
 * Returns a continuation token to continue the session and retry the call once, or nothing to
 * give up (the call then throws the `session_paused` error).
 */
export type OnSoftLimit = (info: SoftLimitInfo) => string | undefined | void | Promise<string | undefined | void>;

export interface GatewayClientOptions {
  /** The gateway's address, e.g. `https://gateway.example`. */
  baseUrl: string;
  /** The budget owner's API key, for the session API. The agent needs only its session token. */
  ownerKey?: string;
  fetch?: Fetch;
  /** Waits between `session.fetch` retries (default the host's timer; without one, retries at once). */
  sleep?: (ms: number) => Promise<void>;
}

export interface SessionConfig {
  budget: { amount: string; currency: string };
  purposes: string[];
  expiresAt: string;
  label?: string;
  merchantAllowlist?: string[];
  merchantBlocklist?: string[];
  velocity?: { maxPaymentsPerHour?: number; maxAmountPerMerchantPerDay?: string };
  softLimit?: { amount: string };
  webhookUrl?: string;
  thresholds?: number[];
  trustLevel?: 0 | 1;
  /**
   * The purpose of a payment whose request names none (an agent behind the gateway's egress proxy); one of `purposes`.
   */
  defaultPurpose?: string;
  windows?: BudgetWindow[];
  windowsStart?: string;
}

/** A window as it stands now (GET /session, GET /sessions/{id}). */
export interface WindowView extends BudgetWindow {
  spentMinor: string;
  reservedMinor: string;
  remainingMinor: string;
  payments: number;
  startedAt: string;
  resetsAt: string;
}

/**
 * A sub-agent's share of a session (PROTOCOL.md §14, POST /sessions/{id}/children): every field
 * narrows the parent's and is the parent's when absent; a widening one is `delegation_invalid`.
 */
export interface ChildSessionConfig {
  budget: { amount: string; currency?: string };
  purposes?: string[];
  expiresAt?: string;
  label?: string;
  merchantAllowlist?: string[];
  merchantBlocklist?: string[];
  velocity?: { maxPaymentsPerHour?: number; maxAmountPerMerchantPerDay?: string };
  windows?: BudgetWindow[];
  windowsStart?: string;
}

export interface CreatedSession {
  sessionToken: string;
  sessionId: string;
  revocationUrl: string;
  policyHash: string;
  grantId: string;
  expiresAt: string;
  webhookSecret?: string;
}

/** A child session made by `session.delegate(...)`: its token is the sub-agent's. */
export interface CreatedChildSession extends CreatedSession {
  parentId: string;
  depth: number;
}

/**
 * What an agent's token may read of its session (GET /session): the owner's view without the continuation token or
 * webhook.
 */
export interface AgentSessionView {
  sessionId: string;
  label: string;
  state: 'active' | 'paused' | 'revoked' | 'expired';
  budget: { amount: string; currency: string };
  purposes: string[];
  expiresAt: string;
  spentMinor: string;
  reservedMinor: string;
  remainingMinor: string;
  policyHash: string;
  grantId: string;
  /** Each budget window's standing, when the session has windows. */
  windows?: WindowView[];
  /** While paused at a window's soft limit: which window, and when it resumes by itself. */
  pausedWindow?: { every: string; resetsAt: string };
  /** A child session: its parent and depth below the root. */
  parentId?: string;
  depth?: number;
  [more: string]: unknown;
}

/** The owner's view of a session (GET /sessions/{id}); the continuation token only while paused. */
export interface SessionView extends AgentSessionView {
  continuationToken?: string;
}

export type ProxyInit = RequestInit & {
  purpose?: string;
  /**
   * The request's `Idempotency-Key` (printable ASCII, 1–255 characters); default: a fresh random
   * one (128 bits) per call, also taken from an `Idempotency-Key` in `headers`. Every retry of the
   * call carries the same key, so the gateway pays it at most once.
   */
  idempotencyKey?: string;
  /**
   * Retries with the same key after a network error, a gateway 5xx (`upstream_error`,
   * `upstream_timeout`, `unavailable`, `internal`) or a 409 while the first attempt is still in
   * flight (default 2; 0 turns them off). Never after an abort, a replayed answer, a merchant's
   * own answer or `paid_response_lost` (paid, the answer lost: a new call pays again); a stream
   * body is sent once. A gateway still unreachable after them is a CtlError `upstream_error`.
   */
  retries?: number;
};

export interface AgentSession {
  readonly token: string;
  /** The session id, once known (given at creation, or learned from the gateway's answers). */
  readonly sessionId: string | undefined;
  /**
   * Fetches `url` through the gateway. Merchant responses come back as they are; the gateway's
   * own refusals throw (`CtlBudgetExceededError` for `budget_exceeded`, else `GatewayError`
   * with `code` and `status`; a `rate_limited` refusal (429) also has `retryAfterSeconds`, a full
   * window's `window_exceeded` also `resetsAt`). Each call sends one `Idempotency-Key` (random, or
   * `idempotencyKey`) and reuses it on its own retries (network error, gateway 5xx, 409 in flight, the soft-limit
   * continuation), so a retried call is paid at most once; a replayed answer has `Idempotent-Replayed: true`.
   * @example const res = await session.fetch('https://api.example/search?q=x', { purpose: 'api:search' })
   * @example await session.fetch(url, { purpose: 'api:search', method: 'POST', body, idempotencyKey: orderId })
   */
  fetch(url: string | URL, init?: ProxyInit): Promise<Response>;
  /** Resumes a paused session with a continuation token (PATCH /sessions/{id}). */
  continueSession(continuationToken: string, amount?: string): Promise<SessionView>;
  /**
   * The session as its token sees it (GET /session): state, spend, remaining, expiry; never the
   * continuation token, which is the owner's approval to give.
   * @example const { state, remainingMinor } = await session.status()
   */
  status(): Promise<AgentSessionView>;
  /** The session's signed receipts, oldest first (GET /session/receipts). */
  receipts(): Promise<{ sessionId: string; receipts: Record<string, unknown>[] }>;
  /** One signed receipt of this session, e.g. the `X-Ctl-Receipt-Id` of a paid call (GET /session/receipts/{id}). */
  receipt(receiptId: string): Promise<Record<string, unknown>>;
  /**
   * Gives a sub-agent part of this session's budget: a child session (POST /sessions/{id}/children,
   * authorised by this session's token) that only narrows this one. Each payment of the child also
   * counts here, so children together never spend more than this session can.
   * @example const { sessionToken } = await session.delegate({ budget: { amount: '500' }, purposes: ['api:search'] })
   */
  delegate(config: ChildSessionConfig): Promise<CreatedChildSession>;
}

async function errorOf(res: Response): Promise<Error> {
  let code = 'internal';
  let message = `HTTP ${res.status}`;
  let resetsAt: string | undefined;
  try {
    const body = (await res.json()) as { error?: { code?: unknown; message?: unknown; resetsAt?: unknown } };
    if (typeof body?.error?.code === 'string') code = body.error.code;
    if (typeof body?.error?.message === 'string') message = body.error.message;
    if (typeof body?.error?.resetsAt === 'string') resetsAt = body.error.resetsAt;
  } catch {
    // not JSON: keep the status line
  }
  // 429 `rate_limited`, a full or paused window (PROTOCOL.md §13): Retry-After says when to try again.
  const retry = res.headers.get('retry-after') === null ? NaN : Number(res.headers.get('retry-after'));
  const extra = {
    status: res.status,
    ...(Number.isSafeInteger(retry) && retry >= 0 ? { retryAfterSeconds: retry } : {}),
    ...(resetsAt ? { resetsAt } : {}),
  };
  if (code === 'budget_exceeded') return Object.assign(new CtlBudgetExceededError(message), extra);
  // A protocol refusal (budget, session state, policy) is a CtlError the agent can act on; a
  // service code (auth, not found, upstream) stays a GatewayError with the HTTP status.
  if (isCtlErrorCode(code) && !isServiceErrorCode(code)) return Object.assign(new CtlError(code, message), extra);
  return new GatewayError(res.status, code, message, res.headers.get('x-ctl-receipt-id') ?? undefined);
}

/**
 * @example
 *   const owner = createGatewayClient({ baseUrl, ownerKey })
 *   const { sessionToken, sessionId } = await owner.createSession({ budget: { amount: '5000', currency: 'USD' },
 *     purposes: ['api:search'], expiresAt: formatTimestamp(Date.now() + 86_400_000) }) // ≤ 30 days ahead by default
 *   const agent = createGatewayClient({ baseUrl }).session(sessionToken, { sessionId })
 *   const res = await agent.fetch('https://merchant.example/data', { purpose: 'api:search' })
 */
export function createGatewayClient(options: GatewayClientOptions) {
  if (!options || typeof options.baseUrl !== 'string')
    throw new TypeError('createGatewayClient: options.baseUrl is required');
  const base = options.baseUrl.replace(/\/+$/, '');
  const doFetch: Fetch | undefined = options.fetch ?? hostFetch();
  if (!doFetch) throw new TypeError('createGatewayClient: this host has no fetch; pass options.fetch');
  const sleep = options.sleep ?? hostSleep() ?? (async () => {});
  const owner = ownerRequests(base, doFetch, options);

  const client = {
    /**
     * The gateway's transparency log as this client sees it, under the log key it pins (the
     * vkey published out of band, never taken from the gateway alone): `refresh()` keeps each new
     * checkpoint only when consistent with the last (kept in `store`, else memory);
     * `verifyReceiptIncluded(receipt, logIndex?)` proves a receipt is in it.
     * @example const log = client.log(vkey); await log.refresh(); await log.verifyReceiptIncluded(receipt)
     */
    log(vkey: string, store?: CheckpointStore): LogFollower {
      return createLogFollower({ baseUrl: base, vkey, fetch: doFetch, ...(store ? { store } : {}) });
    },
    createSession: (config: SessionConfig) => owner<CreatedSession>('POST', '/sessions', config),
    getSession: (sessionId: string) => owner<SessionView>('GET', `/sessions/${idSegment(sessionId)}`),
    listSessions: (o: { limit?: number; cursor?: string } = {}) => {
      const q = [
        o.limit !== undefined ? `limit=${o.limit}` : '',
        o.cursor ? `cursor=${encodeURIComponent(o.cursor)}` : '',
      ]
        .filter(Boolean)
        .join('&');
      return owner<{ sessions: SessionView[]; nextCursor?: string }>('GET', `/sessions${q ? `?${q}` : ''}`);
    },
    revokeSession: (sessionId: string) => owner<SessionView>('DELETE', `/sessions/${idSegment(sessionId)}`),
    receipts: (sessionId: string) =>
      owner<{ sessionId: string; receipts: Record<string, unknown>[] }>(
        'GET',
        `/sessions/${idSegment(sessionId)}/receipts`,
      ),
    /** The owner continues a paused session (spec §3 paused row). */
    continueSession: (sessionId: string, continuationToken: string, amount?: string) =>
      owner<SessionView>(
        'PATCH',
        `/sessions/${idSegment(sessionId)}`,
        amount ? { continuationToken, amount } : { continuationToken },
      ),

    /** The agent's side: requests through `/proxy` with the session token. */
    session(token: string, o: { sessionId?: string; onSoftLimit?: OnSoftLimit } = {}): AgentSession {
      return agentSession({ base, doFetch, sleep, owner }, token, o);
    },
  };
  return client;
}

/** A session id as one segment of a path. */
const idSegment = (sessionId: string) => encodeURIComponent(sessionId);

/** One call of the gateway's session API under a bearer key: the owner's by default, or an agent's token. */
type GatewayRequest = <T>(method: string, path: string, body?: unknown, key?: string) => Promise<T>;

/** The client's parts share the gateway, its fetch and timer, and its session API. */
interface ClientContext extends GatewayTransport {
  owner: GatewayRequest;
}

function ownerRequests(base: string, doFetch: Fetch, options: GatewayClientOptions): GatewayRequest {
  return async function owner<T>(method: string, path: string, body?: unknown, key = options.ownerKey): Promise<T> {
    if (!key) throw new TypeError('createGatewayClient: options.ownerKey is required for the session API');
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await doFetch(base + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    }).catch((e) => {
      throw unreachable(base + path, e);
    });
    if (!res.ok) throw await errorOf(res);
    return (await res.json()) as T;
  };
}

/** The agent's side of one session: its token's view of the session API and `fetch` through `/proxy`. */
function agentSession(
  ctx: ClientContext,
  token: string,
  o: { sessionId?: string; onSoftLimit?: OnSoftLimit },
): AgentSession {
  const { owner } = ctx;
  let sessionId = o.sessionId;
  // A window pause names its reset (PROTOCOL.md §13); the session's view names the window.
  const pauseKind = async (err: Error): Promise<Pick<SoftLimitInfo, 'kind' | 'every' | 'resetsAt'>> => {
    const resetsAt = (err as { resetsAt?: unknown }).resetsAt;
    if (typeof resetsAt !== 'string') return { kind: 'ceiling' };
    const every = await agent.status().then(
      (v) => v.pausedWindow?.every,
      () => undefined,
    );
    return { kind: 'window', ...(every ? { every } : {}), resetsAt };
  };
  const agent: AgentSession = {
    token,
    get sessionId() {
      return sessionId;
    },
    async continueSession(continuationToken, amount) {
      if (!sessionId) throw new TypeError('continueSession: the session id is not known yet; pass options.sessionId');
      return owner<SessionView>(
        'PATCH',
        `/sessions/${idSegment(sessionId)}`,
        amount ? { continuationToken, amount } : { continuationToken },
        token,
      );
    },
    async status() {
      const v = await owner<AgentSessionView>('GET', '/session', undefined, token);
      sessionId = v.sessionId;
      return v;
    },
    receipts: () =>
      owner<{ sessionId: string; receipts: Record<string, unknown>[] }>('GET', '/session/receipts', undefined, token),
    receipt: (receiptId) =>
      owner<Record<string, unknown>>('GET', `/session/receipts/${encodeURIComponent(receiptId)}`, undefined, token),
    async delegate(config) {
      if (!sessionId) await agent.status();
      return owner<CreatedChildSession>('POST', `/sessions/${idSegment(sessionId!)}/children`, config, token);
    },
    async fetch(url, init = {}) {
      const send = proxySender(ctx, token, url, init, (res) => {
        sessionId = res.headers.get('x-ctl-session-id') ?? sessionId;
      });
      let res = await send();
      if (res.headers.get('x-ctl-gateway-error') === null) return res;
      const err = await errorOf(res);
      if ((err as { code?: string }).code === 'session_paused' && o.onSoftLimit) {
        const continuation = await o.onSoftLimit({
          sessionId,
          code: 'session_paused',
          ...(await pauseKind(err)),
          message: err.message,
          url: String(url),
        });
        // The owner's continuation resumes the session; the call is sent again under the same key.
        if (typeof continuation === 'string' && continuation) {
          await agent.continueSession(continuation);
          res = await send();
          if (res.headers.get('x-ctl-gateway-error') === null) return res;
          throw await errorOf(res);
        }
      }
      throw err;
    },
  };
  return agent;
}

export type GatewayClient = ReturnType<typeof createGatewayClient>;
