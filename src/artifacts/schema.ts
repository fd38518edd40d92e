/**
 * Closed-object parsing (PROTOCOL.md §3: unknown members are rejected, `null` is malformed,
 * optional members are omitted). Each check throws `CtlError('malformed')` naming the field path.
 */
import { fail } from '../errors.js';
import {
  bad,
  isAmount,
  isCounter,
  isCurrency,
  isHash,
  isIdentifier,
  isIssuer,
  isPurpose,
  isPurposePattern,
  parseTimestamp,
} from '../values.js';
import { base64urlDecode } from '../encoding/base64url.js';
import { isEnumerable, isPlainObject } from '../encoding/jcs.js';

export type Check = (value: unknown, field: string) => void;
/** `[required, check]` per member. */
export type Shape = Record<string, readonly [boolean, Check]>;

export { bad };

export { isPlainObject };

/** Checks `value` against a closed shape. */
export function checkShape(value: unknown, field: string, shape: Shape): asserts value is Record<string, unknown> {
  if (!isPlainObject(value)) bad(field, 'must be an object');
  for (const key of Object.keys(value)) {
    if (!Object.prototype.hasOwnProperty.call(shape, key)) bad(field, `unknown member "${key.slice(0, 64)}"`);
  }
  for (const key in shape) {
    const [required, check] = shape[key]!;
    const v = value[key];
    // Present means own and enumerable, as canonicalize writes it: what is checked is what is signed.
    if (!isEnumerable.call(value, key) || v === undefined) {
      if (required) bad(field, `missing member "${key}"`);
      continue;
    }
    if (v === null) bad(`${field}.${key}`, 'null is not allowed; omit the member instead');
    check(v, `${field}.${key}`);
  }
}

/** A member checked elsewhere (before, or by its caller). */
export const checked: Check = () => undefined;

export const str =
  (re: RegExp, what: string): Check =>
  (v, f) => {
    if (typeof v !== 'string' || !re.test(v)) bad(f, `must be ${what}`);
  };
export const amount: Check = (v, f) => {
  if (!isAmount(v)) bad(f, 'must be a decimal string of minor units');
};
export const currency: Check = (v, f) => {
  if (!isCurrency(v)) bad(f, 'must be a currency code');
};
export const hash: Check = (v, f) => {
  if (!isHash(v)) bad(f, 'must be 64 lowercase hex characters');
};
export const identifier: Check = (v, f) => {
  if (!isIdentifier(v)) bad(f, 'must be an identifier [A-Za-z0-9._:-]{1,128}');
};
/** A did:key URL naming the DID's own key, `<did>#<multibase>` (PROTOCOL.md §10). */
const DID_KEY_URL = /^did:key:(z[1-9A-HJ-NP-Za-km-z]{1,128})#\1$/;
/** @example isDidKeyUrl('did:key:z6Mk…#z6Mk…') // true */
export const isDidKeyUrl = (v: unknown): v is string => typeof v === 'string' && DID_KEY_URL.test(v);
/** A key id: an identifier, or the did:key URL of a human's key (PROTOCOL.md §10). */
export const keyIdentifier: Check = (v, f) => {
  if (!isIdentifier(v) && !isDidKeyUrl(v)) bad(f, 'must be an identifier [A-Za-z0-9._:-]{1,128} or a did:key URL');
};
export const issuer: Check = (v, f) => {
  if (!isIssuer(v)) bad(f, 'must be printable ASCII without spaces, 1–256 characters');
};
export const timestamp: Check = (v, f) => {
  parseTimestamp(v, f);
};
export const counter: Check = (v, f) => {
  if (!isCounter(v)) bad(f, 'must be a safe integer ≥ 0');
};
export const purpose: Check = (v, f) => {
  if (!isPurpose(v)) bad(f, 'must be <domain>:<kind>');
};
export const purposePattern: Check = (v, f) => {
  if (!isPurposePattern(v)) bad(f, 'must be <domain>:<kind> or <domain>:*');
};
export const version: Check = (v, f) => {
  if (v !== 1) bad(f, 'must be 1');
};
/** Printable ASCII: rails, merchant ids, URLs. */
export const printable = (max: number): Check =>
  str(new RegExp(`^[\\x21-\\x7e]{1,${max}}$`), `printable ASCII without spaces, at most ${max} characters`);
export const rail: Check = str(/^[A-Za-z0-9._:-]{1,64}$/, 'a rail name [A-Za-z0-9._:-]{1,64}');
export const url: Check = (v, f) => {
  if (typeof v !== 'string' || v.length > 2048 || !/^https?:\/\/[\x21-\x7e]+$/.test(v))
    bad(f, 'must be an http(s) URL');
};
/** base64url of exactly `n` bytes. */
export const bytes =
  (n: number): Check =>
  (v, f) => {
    if (typeof v !== 'string') bad(f, 'must be base64url');
    if (base64urlDecode(v).length !== n) bad(f, `must encode ${n} bytes`);
  };
export const signature: Check = bytes(64);

export const arrayOf =
  (item: Check, opts: { min?: number; max?: number; unique?: boolean } = {}): Check =>
  (v, f) => {
    if (!Array.isArray(v)) bad(f, 'must be an array');
    const { min = 0, max = 256, unique = false } = opts;
    if (v.length < min) bad(f, min === 1 ? 'must not be empty' : `must have at least ${min} entries`);
    if (v.length > max) bad(f, `must have at most ${max} entries`);
    for (let i = 0; i < v.length; i++) {
      if (v[i] === null) bad(`${f}[${i}]`, 'null is not allowed');
      item(v[i], `${f}[${i}]`);
    }
    if (unique && new Set(v as unknown[]).size !== v.length) bad(f, 'must not repeat entries');
  };

export const object =
  (shape: Shape): Check =>
  (v, f) =>
    checkShape(v, f, shape);

export const asset: Check = object({
  standard: [true, str(/^[a-z0-9._-]{1,32}$/, 'a standard name such as "iso4217"')],
  code: [true, currency],
});

/** `actorKey`: exactly the RFC 7638 thumbprint members (PROTOCOL.md §3). */
export const thumbprintJwk: Check = (v, f) => {
  if (!isPlainObject(v)) bad(f, 'must be a JWK object');
  if (v['kty'] === 'OKP') {
    checkShape(v, f, { kty: [true, checked], crv: [true, str(/^Ed25519$/, '"Ed25519"')], x: [true, bytes(32)] });
  } else if (v['kty'] === 'EC') {
    checkShape(v, f, {
      kty: [true, checked],
      crv: [true, str(/^P-256$/, '"P-256"')],
      x: [true, bytes(32)],
      y: [true, bytes(32)],
    });
  } else bad(`${f}.kty`, 'must be "OKP" or "EC"');
};

const PURPOSES = ['grant', 'sba', 'bundle', 'receipt', 'webhook'];
/** A JWKS or bundle entry: thumbprint members + kid, alg, purposes (+ status). */
export const publishedJwk: Check = (v, f) => {
  if (!isPlainObject(v)) bad(f, 'must be a JWK object');
  const { kid, alg, purposes, status, ...core } = v;
  thumbprintJwk(core, f);
  keyIdentifier(kid, `${f}.kid`);
  if (!(alg === 'EdDSA' && core['kty'] === 'OKP') && !(alg === 'ES256' && core['kty'] === 'EC')) {
    bad(`${f}.alg`, 'must be "EdDSA" for OKP keys or "ES256" for EC keys');
  }
  arrayOf(str(/^[a-z]+$/, 'a purpose'), { min: 1, max: 8, unique: true })(purposes, `${f}.purposes`);
  for (const p of purposes as string[]) if (!PURPOSES.includes(p)) bad(`${f}.purposes`, `unknown purpose "${p}"`);
  if (status !== undefined && status !== 'active' && status !== 'retired')
    bad(`${f}.status`, 'must be "active" or "retired"');
};

/**
 * `expiresAt` after `issuedAt` (both already timestamps); gives `expiresAt` in ms. @example checkTimeOrder(grant,
 * 'grant')
 */
export function checkTimeOrder(value: Record<string, unknown>, field: string): number {
  const expires = parseTimestamp(value['expiresAt'], `${field}.expiresAt`);
  if (expires <= parseTimestamp(value['issuedAt'], `${field}.issuedAt`))
    bad(`${field}.expiresAt`, 'must be after issuedAt');
  return expires;
}

/** `version` first: an integer other than 1 is `unsupported_version`, not `malformed` (PROTOCOL.md §5 step 0). */
export function checkVersion(value: unknown, field: string): void {
  if (!isPlainObject(value)) bad(field, 'must be an object');
  const v = value['version'];
  if (typeof v === 'number' && Number.isSafeInteger(v) && v !== 1) {
    fail('unsupported_version', `${field}.version ${v} is not supported (only 1 is)`);
  }
}
