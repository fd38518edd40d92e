/**
 * Who is asking the egress proxy: the session token in standard proxy credentials
 * (`Proxy-Authorization: Basic`, RFC 9110 §11.7.1), as clients send them from
 * `HTTPS_PROXY=http://<anything>:<session token>@gateway:port`. Every failure is a 407 with
 * `Proxy-Authenticate`, so a client asks for (or reports) credentials rather than retrying blind.
 */
import { effectiveState, type SessionRecord } from '../sessions/store.js';

export const PROXY_REALM = 'ctl-gateway';

export type ProxyAuth =
  | { ok: true; token: string; session: SessionRecord }
  | { ok: false; code: 'unauthorized' | 'session_revoked' | 'session_expired'; message: string };

/**
 * The token of a `Basic` credential: the password, or the user name when the password is empty
 * (`http://<token>@gateway:port`, which some clients write instead).
 * @example proxyToken('Basic ' + btoa('agent:gw_sess_abc')) // 'gw_sess_abc'
 */
export function proxyToken(header: string | undefined): string | undefined {
  const m = /^Basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i.exec(header ?? '');
  if (!m) return undefined;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  const token = colon < 0 ? text : text.slice(colon + 1) || text.slice(0, colon);
  // Clients percent-encode userinfo; a token is URL-safe, so decoding only undoes that.
  try {
    return decodeURIComponent(token) || undefined;
  } catch {
    return token || undefined;
  }
}

/**
 * The session behind a proxy credential, or why there is none (spec §3: revoked and expired sessions forward nothing).
 */
export async function authenticateProxy(
  header: string | undefined,
  sessionByToken: (token: string) => Promise<SessionRecord | undefined>,
  now: number,
): Promise<ProxyAuth> {
  const token = proxyToken(header);
  if (!token)
    return {
      ok: false,
      code: 'unauthorized',
      message: 'proxy credentials are required: set the proxy URL to http://agent:<session token>@<gateway>:<port>',
    };
  const session = await sessionByToken(token);
  if (!session) return { ok: false, code: 'unauthorized', message: 'the session token is not valid' };
  const state = effectiveState(session, now);
  if (state === 'revoked') return { ok: false, code: 'session_revoked', message: 'the session has been revoked' };
  if (state === 'expired') return { ok: false, code: 'session_expired', message: 'the session has expired' };
  return { ok: true, token, session };
}
