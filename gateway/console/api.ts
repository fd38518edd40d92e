/**
 * The owner API from the browser (gateway/routes/sessions.ts, as is): the owner key from this
 * tab's session storage as the bearer, errors as `ApiError { status, code, message }`.
 */
import type { createSessionService } from '../sessions/service.js';
import type { SessionDispatch } from '../sessions/dispatches.js';
import type { Receipt } from '../../src/index.js';

const KEY = 'ctl.console.ownerKey';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export const ownerKey = {
  get: () => sessionStorage.getItem(KEY) ?? undefined,
  set: (k: string) => sessionStorage.setItem(KEY, k),
  clear: () => sessionStorage.removeItem(KEY),
};

/**
 * What `GET /sessions/:id` answers: the gateway's own view, so the two cannot drift (type-only: erased from the
 * bundle).
 */
export type SessionView = ReturnType<ReturnType<typeof createSessionService>['view']>;

/** `GET /sessions/:id`: the view with each window as it stands (PROTOCOL.md §13). */
export type SessionDetail = Awaited<ReturnType<ReturnType<typeof createSessionService>['detail']>>;
/** `GET /sessions/:id/tree`: a session and every child session below it. */
export type SessionTree = Awaited<ReturnType<ReturnType<typeof createSessionService>['tree']>>;

/** A receipt as the gateway signs it (the SDK's own type: erased from the bundle). */
export type { Receipt };

/** One webhook delivery of a session, as `GET /sessions/:id/dispatches` answers. */
export type Dispatch = SessionDispatch;

/** Called when the key stops working mid-session (revoked, owner disabled). */
let onUnauthorized: (message: string) => void = () => {};
export const setUnauthorizedHandler = (f: (message: string) => void) => (onUnauthorized = f);

export async function api<T>(method: string, path: string, body?: unknown, key = ownerKey.get()): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'unavailable', 'The gateway could not be reached. Check your connection and try again.');
  }
  const text = await res.text();
  let parsed: any;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!res.ok) {
    const e = new ApiError(
      res.status,
      parsed?.error?.code ?? 'internal',
      parsed?.error?.message ?? `HTTP ${res.status}`,
    );
    if (res.status === 401 && key && key === ownerKey.get())
      onUnauthorized('Your API key is no longer accepted (revoked, or the owner was disabled). Sign in again.');
    throw e;
  }
  return parsed as T;
}

export const listSessions = (cursor?: string) =>
  api<{ sessions: SessionView[]; nextCursor?: string }>(
    'GET',
    `/sessions?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
  );
export const getSession = (id: string) => api<SessionDetail>('GET', `/sessions/${encodeURIComponent(id)}`);
export const treeOf = (id: string) => api<SessionTree>('GET', `/sessions/${encodeURIComponent(id)}/tree`);
/** A session's receipts; with `descendants`, also those of the sessions below it (its spend counts them). */
export const receiptsOf = (id: string, descendants = false) =>
  api<{ receipts: Receipt[] }>(
    'GET',
    `/sessions/${encodeURIComponent(id)}/receipts${descendants ? '?descendants=true' : ''}`,
  );
export const dispatchesOf = (id: string) =>
  api<{ dispatches: Dispatch[]; webhookUrl?: string }>('GET', `/sessions/${encodeURIComponent(id)}/webhooks`);
export const revokeSession = (id: string) => api<SessionView>('DELETE', `/sessions/${encodeURIComponent(id)}`);
export const continueSession = (id: string, continuationToken: string, amount?: string) =>
  api<SessionView>('PATCH', `/sessions/${encodeURIComponent(id)}`, {
    continuationToken,
    ...(amount ? { amount } : {}),
  });
export const createSession = (config: Record<string, unknown>) =>
  api<{
    sessionToken: string;
    sessionId: string;
    expiresAt: string;
    policyHash: string;
    grantId: string;
    webhookSecret?: string;
  }>('POST', '/sessions', config);

/** `GET /log/status` (service-kit/tlog/routes.ts): the gateway's transparency log and its witnesses. Public. */
export interface LogStatus {
  origin: string;
  vkey: string;
  checkpoint: {
    size: number;
    root: string;
    note: string;
    signedAt: string;
    cosignedBy: string[];
    cosignatures: Array<{ name: string; time: string }>;
  } | null;
  witnesses: Array<{ name: string; cosignedSize: number | null; lastError: string | null; at: string | null }>;
  witness: {
    name: string;
    logs: Array<{ origin: string; size: number; root: string | null; cosignedAt: string | null }>;
    splitViews: Array<{ origin: string; size: number; detectedAt: string }>;
  } | null;
  splitView: boolean;
}
export const logStatus = () => api<LogStatus>('GET', '/log/status');
