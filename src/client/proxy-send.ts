/**
 * How an agent's call reaches the gateway's `/proxy` (spec §4.4 "Agent-side client"): one
 * `Idempotency-Key` per logical call, reused by each of its retries, so a retried call is paid at
 * most once (gateway/README.md "Idempotency-Key"). Portable: only the fetch it is given.
 */
import { CtlError } from '../errors.js';
import { newId } from '../ids.js';
import type { ProxyInit } from './gateway-client.js';

type Fetch = typeof fetch;

/** The gateway a client talks to, with its fetch and the timer its retries wait on. */
export interface GatewayTransport {
  base: string;
  doFetch: Fetch;
  sleep: (ms: number) => Promise<void>;
}

const IDEMPOTENCY_KEY = /^[\x20-\x7e]{1,255}$/;
// Gateway failures where nothing was paid under the key (the gateway freed it) or the key is held: a retry is safe.
const RETRYABLE_5XX = new Set(['upstream_error', 'upstream_timeout', 'unavailable', 'internal']);
const MAX_WAIT_MS = 5000;

/**
 * A gateway that gave no answer at all (refused connection, DNS, TLS): `upstream_error` naming
 * the URL, the host's own error as `cause`. An abort stays the caller's own AbortError.
 */
export function unreachable(url: string, e: unknown): unknown {
  const name = (e as Error)?.name;
  if (name === 'AbortError' || name === 'TimeoutError') return e;
  const detail = (e as { cause?: { code?: string } })?.cause?.code ?? (e as Error)?.message;
  return Object.assign(new CtlError('upstream_error', `the gateway at ${url} could not be reached: ${detail}`), {
    cause: e,
  });
}

/** How long to wait before retrying this answer with the same key, or undefined not to retry it. */
function retryDelay(res: Response, attempt: number): number | undefined {
  const code = res.headers.get('x-ctl-gateway-error');
  if (code === null || res.headers.get('idempotent-replayed') !== null) return undefined;
  if (res.status === 409 && code === 'conflict') {
    // In flight: the gateway says when to ask again (the other 409, another request under this key, has no
    // Retry-After).
    const after = Number(res.headers.get('retry-after'));
    return res.headers.get('retry-after') !== null && Number.isFinite(after)
      ? Math.min(after * 1000, MAX_WAIT_MS)
      : undefined;
  }
  if (res.status >= 500 && RETRYABLE_5XX.has(code)) return backoff(attempt);
  return undefined;
}

const backoff = (attempt: number) => Math.min(200 * 2 ** attempt, MAX_WAIT_MS);

/** A body that can be sent again (not a one-shot stream). */
function resendable(body: unknown): boolean {
  return body == null || typeof (body as { getReader?: unknown }).getReader !== 'function';
}

function headerRecord(h: HeadersInit | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!h) return out;
  if (Array.isArray(h)) for (const [k, v] of h) out[k.toLowerCase()] = v;
  else if (typeof (h as Headers).forEach === 'function' && typeof (h as Headers).get === 'function')
    (h as Headers).forEach((v, k) => (out[k.toLowerCase()] = v));
  else for (const [k, v] of Object.entries(h as Record<string, string>)) out[k.toLowerCase()] = v;
  return out;
}

/**
 * Checks one `session.fetch(url, init)` call and gives what sends it through `/proxy` with its
 * retries, all under one key; each call of it is the whole logical request again, under the same
 * key (the soft-limit continuation). `seen` is told every answer, as it comes. Throws RangeError.
 */
export function proxySender(
  t: GatewayTransport,
  token: string,
  url: string | URL,
  init: ProxyInit,
  seen: (res: Response) => void,
): () => Promise<Response> {
  // Called as plain functions, as given: a host's fetch refuses another `this`.
  const { base, doFetch, sleep } = t;
  const { purpose, method, headers, idempotencyKey, retries, ...rest } = init;
  // One key per logical request, reused by every retry below (gateway/README.md "Idempotency-Key").
  const key = idempotencyKey ?? headerRecord(headers)['idempotency-key'] ?? newId();
  if (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key))
    throw new RangeError('session.fetch: idempotencyKey must be printable ASCII, 1–255 characters');
  if (retries !== undefined && !(Number.isSafeInteger(retries) && retries >= 0 && retries <= 10))
    throw new RangeError('session.fetch: retries must be an integer from 0 to 10');
  const maxRetries = resendable(rest.body) ? (retries ?? 2) : 0;
  const sendOnce = async () => {
    const h = headerRecord(headers);
    h.authorization = `Bearer ${token}`;
    h['idempotency-key'] = key;
    h['x-target-url'] = String(url);
    h['x-target-method'] = (method ?? 'GET').toUpperCase();
    if (purpose) h['x-ctl-purpose'] = purpose;
    const res = await doFetch(`${base}/proxy`, { ...rest, method: 'POST', headers: h });
    seen(res);
    return res;
  };
  return async () => {
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        res = await sendOnce();
      } catch (e) {
        // No answer (the connection failed): the gateway may have run it; the same key makes asking again safe.
        if (rest.signal?.aborted) throw e;
        if (attempt >= maxRetries) throw unreachable(`${base}/proxy`, e);
        await sleep(backoff(attempt));
        continue;
      }
      const wait = retryDelay(res, attempt);
      if (wait === undefined || attempt >= maxRetries || rest.signal?.aborted) return res;
      await res.body?.cancel().catch(() => {});
      await sleep(wait);
    }
  };
}
