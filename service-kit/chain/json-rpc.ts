/**
 * A small JSON-RPC 2.0 / 1.0 client over fetch: what the bitcoind RPC and an `eth_call` need,
 * with a timeout per call, HTTP Basic credentials kept out of the URL, and errors that say
 * which node and method failed (a node's own error keeps its `code`, so callers can tell
 * "already known" from "unreachable").
 */

export class JsonRpcError extends Error {
  constructor(
    readonly method: string,
    /** The node's error code; undefined when the node did not answer (network, timeout, HTTP status). */
    readonly code: number | undefined,
    message: string,
  ) {
    super(`${method}: ${message}`);
  }
  /** True when the node answered with an error (it is up), false when it could not be reached. */
  get answered(): boolean {
    return this.code !== undefined;
  }
}

export interface JsonRpcOptions {
  url: string;
  /** `user:password` for HTTP Basic (bitcoind), never put in the URL. */
  credentials?: string;
  fetch?: typeof fetch;
  /** Per call (default 10 000 ms). */
  timeoutMs?: number;
  /** '1.0' for bitcoind (its error objects), '2.0' otherwise (default). */
  version?: '1.0' | '2.0';
}

export type JsonRpc = <T = unknown>(method: string, params?: unknown[], path?: string) => Promise<T>;

/** The URL without credentials, for messages. */
export function redactRpcUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return '(an invalid URL)';
  }
}

/**
 * @example const rpc = createJsonRpc({ url: 'http://127.0.0.1:19443', credentials: 'u:p', version: '1.0' });
 * await rpc('getblockcount')
 */
export function createJsonRpc(options: JsonRpcOptions): JsonRpc {
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const base = new URL(options.url);
  const credentials =
    options.credentials ??
    (base.username ? `${decodeURIComponent(base.username)}:${decodeURIComponent(base.password)}` : undefined);
  base.username = '';
  base.password = '';
  const where = redactRpcUrl(base.toString());
  let id = 0;
  return async <T>(method: string, params: unknown[] = [], path?: string): Promise<T> => {
    const url = path ? new URL(path, base).toString() : base.toString();
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (credentials) headers['authorization'] = `Basic ${Buffer.from(credentials).toString('base64')}`;
    let res: Response;
    try {
      res = await doFetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ jsonrpc: options.version ?? '2.0', id: ++id, method, params }),
        signal: AbortSignal.timeout(timeoutMs),
        redirect: 'error',
      });
    } catch (e) {
      const why = (e as Error)?.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (e as Error).message;
      throw new JsonRpcError(method, undefined, `${where} unreachable (${why})`);
    }
    let body: { result?: T; error?: { code?: number; message?: string } | null };
    try {
      body = (await res.json()) as typeof body;
    } catch {
      throw new JsonRpcError(method, undefined, `${where} answered HTTP ${res.status} without JSON`);
    }
    // bitcoind answers its errors with HTTP 500 and a JSON body: the body is what counts.
    if (body?.error) {
      const code = typeof body.error.code === 'number' ? body.error.code : -1;
      throw new JsonRpcError(method, code, `${body.error.message ?? 'error'} (${code})`);
    }
    if (!res.ok) throw new JsonRpcError(method, undefined, `${where} answered HTTP ${res.status}`);
    if (!body || !('result' in body)) throw new JsonRpcError(method, undefined, `${where} answered no result`);
    return body.result as T;
  };
}
