/**
 * Standard Webhooks signatures (spec §5 "Spend webhooks are signed with HMAC", §6): headers
 * `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature: v1,<base64>` where the
 * base64 is HMAC-SHA256 over `${id}.${timestamp}.${body}` with the secret's bytes. Secrets read
 * `whsec_<base64>` (the bytes after the prefix are the key), as the Standard Webhooks libraries use.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export type WebhookHeaders = {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
};

/** A fresh `whsec_` secret of 32 random bytes. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * The key bytes of a `whsec_<base64>` secret (at least 16); throws a RangeError otherwise, so a
 * service can refuse a malformed secret at start rather than at its first delivery.
 * @example secretBytes(process.env.CTL_AUDIT_WEBHOOK_SECRET!)
 */
export function secretBytes(secret: string): Buffer {
  const b64 = secret.startsWith('whsec_') ? secret.slice(6) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) throw new RangeError('webhook secret: expected whsec_<base64>');
  const key = Buffer.from(b64, 'base64');
  if (key.length < 16) throw new RangeError('webhook secret: at least 16 bytes');
  return key;
}

/** base64 HMAC-SHA256 of `${id}.${timestamp}.${body}`. */
function sign(secret: string, id: string, timestamp: number, body: string): string {
  return createHmac('sha256', secretBytes(secret)).update(`${id}.${timestamp}.${body}`, 'utf8').digest('base64');
}

/**
 * The three headers for one delivery.
 * @example fetch(url, { method: 'POST', body, headers: { ...signWebhook(secret, id, ts, body), 'content-type':
 * 'application/json' } })
 */
export function signWebhook(secret: string, id: string, timestampSeconds: number, body: string): WebhookHeaders {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': `v1,${sign(secret, id, timestampSeconds, body)}`,
  };
}

/**
 * Receiver side: true when one of the `v1,` signatures matches and the timestamp is within
 * `toleranceSeconds` (default 300) of `nowSeconds`.
 */
export function verifyWebhook(
  secret: string,
  headers: Record<string, string | undefined>,
  body: string,
  options: { nowSeconds?: number; toleranceSeconds?: number } = {},
): boolean {
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sigs = headers['webhook-signature'];
  if (!id || !ts || !sigs || !/^[0-9]{1,12}$/.test(ts)) return false;
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(ts)) > (options.toleranceSeconds ?? 300)) return false;
  const expected = Buffer.from(sign(secret, id, Number(ts), body), 'base64');
  return sigs.split(' ').some((s) => {
    if (!s.startsWith('v1,')) return false;
    const got = Buffer.from(s.slice(3), 'base64');
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
}
