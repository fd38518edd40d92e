/**
 * API keys (`Authorization: Bearer <key>`, stored only as hashes, compared in constant
 * time, scoped). A key reads `ctlk_<keyId>_<secret>`: the key id finds the stored record, then the
 * SHA-256 of the whole presented key is compared with the stored hash in constant time, so
 * neither a lookup nor a comparison leaks how much of a guess was right.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Middleware } from 'koa';
import { HttpError } from './http-error.js';

/** What a store keeps about a key: never the key itself. */
export interface ApiKeyRecord {
  keyId: string;
  /** hex SHA-256 of the full key string */
  hash: string;
  scopes: string[];
  revokedAt?: string | null;
}

/** Who made the request, set on `ctx.state.principal` by `requireScope`. */
export interface Principal {
  keyId: string;
  scopes: string[];
}

/** The scope that implies every other. */
export const ADMIN_SCOPE = 'admin';

const KEY_PATTERN = /^ctlk_([A-Za-z0-9-]{8,64})_([A-Za-z0-9_-]{22,128})$/;

/** hex SHA-256 of an API key, the only form stored. @example hashApiKey('ctlk_ab…') */
export function hashApiKey(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex');
}

/**
 * A fresh key: 256 random bits of secret, and the record to store (no secret in it).
 * @example const { apiKey, record } = generateApiKey(['grants:write']); await store.putApiKey(record)
 */
export function generateApiKey(scopes: string[], keyId = randomBytes(12).toString('base64url').replace(/_/g, '-')) {
  const apiKey = `ctlk_${keyId}_${randomBytes(32).toString('base64url')}`;
  const record: ApiKeyRecord = { keyId, hash: hashApiKey(apiKey), scopes: [...scopes] };
  return { keyId, apiKey, record };
}

/** The key id inside a key string, or undefined when it is not of our shape. */
export function apiKeyId(apiKey: string): string | undefined {
  return KEY_PATTERN.exec(apiKey)?.[1];
}

/** Constant-time comparison of a presented key with a stored hash. */
export function apiKeyMatches(apiKey: string, hashHex: string): boolean {
  const a = createHash('sha256').update(apiKey, 'utf8').digest();
  const b = Buffer.from(hashHex, 'hex');
  return b.length === a.length && timingSafeEqual(a, b);
}

export interface ApiKeyAuthOptions {
  /** Finds a stored key by id (undefined when unknown). */
  findKey(keyId: string): Promise<ApiKeyRecord | undefined> | ApiKeyRecord | undefined;
  /**
   * A bootstrap key from the environment (e.g. CTL_ADMIN_API_KEY), any string of ≥ 16
   * characters, with the admin scope unless given. Kept only as its hash.
   */
  bootstrapKey?: string;
  bootstrapScopes?: string[];
}

/** The principal for a presented key, or undefined. */
export type Authenticate = (apiKey: string) => Promise<Principal | undefined>;

/** Builds the key check used by `requireScope`. */
export function createApiKeyAuth(options: ApiKeyAuthOptions): Authenticate {
  const boot = options.bootstrapKey;
  if (boot !== undefined && boot.length < 16) throw new RangeError('bootstrapKey: at least 16 characters');
  const bootHash = boot ? hashApiKey(boot) : undefined;
  const bootScopes = options.bootstrapScopes ?? [ADMIN_SCOPE];
  return async (apiKey) => {
    if (bootHash && apiKeyMatches(apiKey, bootHash)) return { keyId: 'bootstrap', scopes: bootScopes };
    const keyId = apiKeyId(apiKey);
    if (!keyId) return undefined;
    const record = await options.findKey(keyId);
    if (!record || record.revokedAt || !apiKeyMatches(apiKey, record.hash)) return undefined;
    return { keyId: record.keyId, scopes: record.scopes };
  };
}

/**
 * The bearer token of an Authorization header, or undefined. The scheme is case-insensitive and
 * followed by one or more spaces (RFC 9110 §11.1, §11.4); the token is taken as sent.
 * @example bearerToken('bearer ctlk_ab_cd') // 'ctlk_ab_cd'
 */
export function bearerToken(header: string | undefined): string | undefined {
  const m = header ? /^bearer +([\x21-\x7e]{1,512})$/i.exec(header) : null;
  return m?.[1];
}

/**
 * Middleware: 401 `unauthorized` without a valid key, 403 `forbidden` without `scope`
 * (the `admin` scope implies every scope). Sets `ctx.state.principal`.
 * @example router.post('/grants', requireScope(auth, 'grants:write'), handler)
 */
export function requireScope(authenticate: Authenticate, scope: string): Middleware {
  return async (ctx, next) => {
    const token = bearerToken(ctx.get('authorization') || undefined);
    const principal = token ? await authenticate(token) : undefined;
    if (!principal)
      throw new HttpError(
        401,
        'unauthorized',
        token ? 'the API key is not valid' : 'an API key is required (Authorization: Bearer <key>)',
      );
    if (!principal.scopes.includes(scope) && !principal.scopes.includes(ADMIN_SCOPE)) {
      throw new HttpError(403, 'forbidden', `the API key lacks the scope '${scope}'`);
    }
    ctx.state.principal = principal;
    return next();
  };
}
