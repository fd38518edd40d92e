/**
 * The agent-side gateway client (spec §4.4 "Agent-side client", issue 4 §8): the budget owner's
 * session API (create, get, list, revoke, receipts, continue) and, for the agent, a
 * `session.fetch()` that goes through the gateway's `/proxy`, so the agent never sees the
 * payment exchange. Portable: no host objects beyond an injectable `fetch` (the host's by default).
 */
import { CtlError, CtlBudgetExceededError, isCtlErrorCode } from '../errors.js';
import { hostFetch } from '../host.js';

type Fetch = typeof fetch;

/** A refusal by the gateway itself (not a merchant response): `{ error: { code, message } }` + HTTP status. */
export class GatewayError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'GatewayError';
    this.status = status;
    this.code = code;
  }
}

/** What `onSoftLimit` is told when a payment would cross the soft ceiling (spec §3 "paused"). */
export interface SoftLimitInfo {
  sessionId: string | undefined;
  code: 'session_paused';
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

export interface SessionView {
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
  continuationToken?: string;
  [more: string]: unknown;
}

export type ProxyInit = RequestInit & { purpose?: string };

export interface AgentSession {
  readonly token: string;
  /** The session id, once known (given at creation, or learned from the gateway's answers). */
  readonly sessionId: string | undefined;
  /**
   * Fetches `url` through the gateway. Merchant responses come back as they are; the gateway's
   * own refusals throw (`CtlBudgetExceededError` for `budget_exceeded`, else `GatewayError`
   * with `code` and `status`).
   * @example const res = await session.fetch('https://api.example/search?q=x', { purpose: 'api:search' })
   */
  fetch(url: string | URL, init?: ProxyInit): Promise<Response>;
  /** Resumes a paused session with a continuation token (PATCH /sessions/{id}). */
  continueSession(continuationToken: string, amount?: string): Promise<SessionView>;
}

async function errorOf(res: Response): Promise<Error> {
  let code = 'internal';
  let message = `HTTP ${res.status}`;
  try {
    const body = (await res.json()) as { error?: { code?: unknown; message?: unknown } };
    if (typeof body?.error?.code === 'string') code = body.error.code;
    if (typeof body?.error?.message === 'string') message = body.error.message;
  } catch {
    // not JSON: keep the status line
  }
  if (code === 'budget_exceeded') return Object.assign(new CtlBudgetExceededError(message), { status: res.status });
  if (isCtlErrorCode(code)) return Object.assign(new CtlError(code, message), { status: res.status });
  return new GatewayError(res.status, code, message);
}

function headerRecord(h: HeadersInit | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!h) return out;
  if (Array.isArray(h)) for (const [k, v] of h) out[k.toLowerCase()] = v;
  else if (typeof (h as Headers).forEach === 'function' && typeof (h as Headers).get === 'function') (h as Headers).forEach((v, k) => (out[k.toLowerCase()] = v));
  else for (const [k, v] of Object.entries(h as Record<string, string>)) out[k.toLowerCase()] = v;
  return out;
}

/**
 * @example
 *   const owner = createGatewayClient({ baseUrl, ownerKey })
 *   const { sessionToken, sessionId } = await owner.createSession({ budget: { amount: '5000', currency: 'USD' },
 *     purposes: ['api:search'], expiresAt: '2030-01-01T00:00:00Z' })
 *   const agent = createGatewayClient({ baseUrl }).session(sessionToken, { sessionId })
 *   const res = await agent.fetch('https://merchant.example/data', { purpose: 'api:search' })
 */
export function createGatewayClient(options: GatewayClientOptions) {
  if (!options || typeof options.baseUrl !== 'string') throw new TypeError('createGatewayClient: options.baseUrl is required');
  const base = options.baseUrl.replace(/\/+$/, '');
  const doFetch: Fetch | undefined = options.fetch ?? hostFetch();
  if (!doFetch) throw new TypeError('createGatewayClient: this host has no fetch; pass options.fetch');

  async function owner<T>(method: string, path: string, body?: unknown, key = options.ownerKey): Promise<T> {
    if (!key) throw new TypeError('createGatewayClient: options.ownerKey is required for the session API');
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await doFetch!(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    if (!res.ok) throw await errorOf(res);
    return (await res.json()) as T;
  }

  const id = (sessionId: string) => encodeURIComponent(sessionId);

  const client = {
    createSession: (config: SessionConfig) => owner<CreatedSession>('POST', '/sessions', config),
    getSession: (sessionId: string) => owner<SessionView>('GET', `/sessions/${id(sessionId)}`),
    listSessions: (o: { limit?: number; cursor?: string } = {}) => {
      const q = [o.limit !== undefined ? `limit=${o.limit}` : '', o.cursor ? `cursor=${encodeURIComponent(o.cursor)}` : ''].filter(Boolean).join('&');
      return owner<{ sessions: SessionView[]; nextCursor?: string }>('GET', `/sessions${q ? `?${q}` : ''}`);
    },
    revokeSession: (sessionId: string) => owner<SessionView>('DELETE', `/sessions/${id(sessionId)}`),
    receipts: (sessionId: string) => owner<{ sessionId: string; receipts: Record<string, unknown>[] }>('GET', `/sessions/${id(sessionId)}/receipts`),
    /** The owner continues a paused session (spec §3 paused row). */
    continueSession: (sessionId: string, continuationToken: string, amount?: string) =>
      owner<SessionView>('PATCH', `/sessions/${id(sessionId)}`, amount ? { continuationToken, amount } : { continuationToken }),

    /** The agent's side: requests through `/proxy` with the session token. */
    session(token: string, o: { sessionId?: string; onSoftLimit?: OnSoftLimit } = {}): AgentSession {
      let sessionId = o.sessionId;
      const agent: AgentSession = {
        token,
        get sessionId() {
          return sessionId;
        },
        async continueSession(continuationToken, amount) {
          if (!sessionId) throw new TypeError('continueSession: the session id is not known yet; pass options.sessionId');
          return owner<SessionView>('PATCH', `/sessions/${id(sessionId)}`, amount ? { continuationToken, amount } : { continuationToken }, token);
        },
        async fetch(url, init = {}) {
          const { purpose, method, headers, ...rest } = init;
          const send = async () => {
            const h = headerRecord(headers);
            h.authorization = `Bearer ${token}`;
            h['x-target-url'] = String(url);
            h['x-target-method'] = (method ?? 'GET').toUpperCase();
            if (purpose) h['x-ctl-purpose'] = purpose;
            const res = await doFetch!(`${base}/proxy`, { ...rest, method: 'POST', headers: h });
            sessionId = res.headers.get('x-ctl-session-id') ?? sessionId;
            return res;
          };
          let res = await send();
          if (res.headers.get('x-ctl-gateway-error') === null) return res;
          const err = await errorOf(res);
          if ((err as { code?: string }).code === 'session_paused' && o.onSoftLimit) {
            const continuation = await o.onSoftLimit({ sessionId, code: 'session_paused', message: err.message, url: String(url) });
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
    },
  };
  return client;
}

export type GatewayClient = ReturnType<typeof createGatewayClient>;
