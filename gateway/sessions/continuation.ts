/**
 * Continuation tokens (spec §3 paused row, §5): `ctn_<nonce>.<mac>` with mac =
 * HMAC-SHA256(secret, "ctl-continuation/1\n" + sessionId + "\n" + nonce). The MAC proves the
 * gateway made it for this session; single use comes from the store, which clears the nonce in
 * the same UPDATE that resumes the session (sessions/store.ts continueSession).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const mac = (secret: Buffer, sessionId: string, nonce: string) =>
  createHmac('sha256', secret).update(`ctl-continuation/1\n${sessionId}\n${nonce}`).digest();

export function continuationToken(secret: Buffer, sessionId: string, nonce: string): string {
  return `ctn_${nonce}.${mac(secret, sessionId, nonce).toString('base64url')}`;
}

/** The nonce inside a token whose MAC is right for this session, else undefined. */
export function continuationNonce(secret: Buffer, sessionId: string, token: unknown): string | undefined {
  if (typeof token !== 'string') return undefined;
  const m = /^ctn_([A-Za-z0-9_-]{16,64})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!m) return undefined;
  const given = Buffer.from(m[2]!, 'base64url');
  const want = mac(secret, sessionId, m[1]!);
  return given.length === want.length && timingSafeEqual(given, want) ? m[1] : undefined;
}
