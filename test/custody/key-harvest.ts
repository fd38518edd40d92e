/**
 * What an attacker with a copy of the databases and the data directory could try: every string
 * that parses as a private key (PEM, JWK with `d`, DER PKCS#8 in base64url) or as an Ed25519 seed
 * (32 bytes as base64url, base64 or hex, with or without 0x), and every public key published
 * anywhere (JWKS, bundle roots, grants' actorKey, any public JWK in the dump). A candidate is
 * usable when its signature verifies under a published key.
 */
import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';

const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export interface Harvest {
  /** Candidate private keys, each with where it was found. */
  candidates: { key: KeyObject; where: string }[];
  /** Ed25519 public keys (JWK x) seen anywhere. */
  published: Set<string>;
  /** How many strings were looked at (a dump that read nothing proves nothing). */
  strings: number;
}

export function createHarvest(): Harvest {
  return { candidates: [], published: new Set(), strings: 0 };
}

function tryKey(h: Harvest, where: string, make: () => KeyObject): void {
  try {
    const k = make();
    if (k.type === 'private') h.candidates.push({ key: k, where });
  } catch {
    /* not a key */
  }
}

const seedKey = (seed: Buffer) =>
  createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });

/** Looks at one value (a cell, a file's text) and everything inside it. */
export function harvestValue(h: Harvest, value: unknown, where: string): void {
  if (value === null || value === undefined) return;
  if (Buffer.isBuffer(value) || value instanceof Uint8Array)
    return harvestValue(h, Buffer.from(value).toString('latin1'), where);
  if (typeof value === 'object') {
    const o = value as Record<string, unknown>;
    if (typeof o.kty === 'string' && typeof o.x === 'string') {
      if (typeof o.d === 'string')
        tryKey(h, `${where} (JWK)`, () => createPrivateKey({ key: o as never, format: 'jwk' }));
      else if (o.crv === 'Ed25519') h.published.add(o.x);
    }
    for (const [k, v] of Object.entries(o)) harvestValue(h, v, `${where}.${k}`);
    return;
  }
  if (typeof value !== 'string') return;
  h.strings++;
  const s = value;
  for (const m of s.matchAll(/-----BEGIN ([A-Z ]*)PRIVATE KEY-----[\s\S]*?-----END \1PRIVATE KEY-----/g)) {
    tryKey(h, `${where} (PEM)`, () => createPrivateKey(m[0]));
  }
  if (/^\s*[[{]/.test(s)) {
    try {
      harvestValue(h, JSON.parse(s), where);
    } catch {
      /* not JSON */
    }
  }
  // Seeds and DER: every token of the alphabets, whole and (for long ones) as any 32-byte window of hex.
  for (const m of s.matchAll(/(?:0x)?([0-9a-fA-F]{64,})/g)) {
    const hex = m[1];
    for (let i = 0; i + 64 <= hex.length; i += 2)
      tryKey(h, `${where} (hex seed)`, () => seedKey(Buffer.from(hex.slice(i, i + 64), 'hex')));
  }
  for (const m of s.matchAll(/[A-Za-z0-9_\-+/]{43,}={0,2}/g)) {
    const t = m[0];
    const bytes = Buffer.from(t.replace(/=+$/, ''), /[+/]/.test(t) ? 'base64' : 'base64url');
    if (bytes.length === 32) tryKey(h, `${where} (base64 seed)`, () => seedKey(bytes));
    else if (bytes.length > 32)
      tryKey(h, `${where} (DER)`, () => createPrivateKey({ key: bytes, format: 'der', type: 'pkcs8' }));
  }
}

/** The candidates that sign for a published key: each is a private key at rest in usable form. */
export function usableKeys(h: Harvest): string[] {
  const found: string[] = [];
  const msg = Buffer.from('is this key usable?');
  for (const c of h.candidates) {
    let x: string;
    try {
      const jwk = createPublicKey(c.key).export({ format: 'jwk' }) as { crv?: string; x?: string };
      if (jwk.crv !== 'Ed25519' || !jwk.x) continue;
      x = jwk.x;
    } catch {
      continue;
    }
    if (!h.published.has(x)) continue;
    const pub = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
    if (verify(null, msg, pub, sign(null, msg, c.key))) found.push(`${c.where}: signs for published key ${x}`);
  }
  return found;
}
