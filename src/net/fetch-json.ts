/**
 * A bounded JSON GET for revocation checks and JWKS: injectable fetch, a timeout on every call,
 * a size cap, and the strict I-JSON parser, since the answer decides whether money moves.
 */
import { CtlError, fail } from '../errors.js';
import { parseStrictJson } from '../encoding/jcs.js';

export type FetchLike = (
  url: string,
  init?: Record<string, unknown>,
) => Promise<{
  ok: boolean;
  status: number;
  text(): Promise<string>;
}>;

const g = globalThis as Record<string, any>;

/** GETs `url` and parses the body strictly; throws `CtlError(failCode)` on any failure. */
export async function fetchJson(
  fetchFn: FetchLike | undefined,
  url: string,
  { timeoutMs = 3000, maxBytes = 1 << 20, failCode = 'revocation_unavailable' as const } = {},
): Promise<unknown> {
  if (!fetchFn) fail(failCode, `no fetch available to reach ${url}`);
  const controller = typeof g['AbortController'] === 'function' ? new g['AbortController']() : undefined;
  let timer: unknown;
  const timeout = new Promise<never>((_, reject) => {
    if (typeof g['setTimeout'] === 'function') {
      timer = g['setTimeout'](() => {
        controller?.abort();
        reject(new CtlError(failCode, `${url} did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
    }
  });
  try {
    const res = await Promise.race([
      fetchFn(url, {
        method: 'GET',
        headers: { accept: 'application/json' },
        signal: controller?.signal,
        redirect: 'error',
      }),
      timeout,
    ]);
    if (!res.ok) fail(failCode, `${url} answered ${res.status}`);
    const text = await Promise.race([res.text(), timeout]);
    if (text.length > maxBytes) fail(failCode, `${url} answered more than ${maxBytes} bytes`);
    return parseStrictJson(text);
  } catch (e) {
    if (e instanceof CtlError && e.code === failCode) throw e;
    fail(failCode, `${url}: ${e instanceof Error ? e.message : String(e)}`);
  } finally {
    if (timer !== undefined && typeof g['clearTimeout'] === 'function') g['clearTimeout'](timer);
  }
}
