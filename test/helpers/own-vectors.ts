/**
 * Our own committed vectors (test/vectors/own/*.json, format in its README.md) and how a chain
 * case becomes verifyCtl options: one reading for every test that replays them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './vectors.js';
import { parseTimestamp } from '../../src/values.js';
import type { VerifyCtlOptions } from '../../src/verifier/verify.js';
import type { FetchLike } from '../../src/net/fetch-json.js';

export const ownVectorsDir = join(repoRoot, 'test', 'vectors', 'own');

/** The keys a file names, by the name its cases' `trust` forms use. */
export type OwnKeys = Record<string, { publicKeyPem: string }>;

/** @example readOwnVectors('grant.json').cases */
export function readOwnVectors(file: string): any {
  return JSON.parse(readFileSync(join(ownVectorsDir, file), 'utf8'));
}

/**
 * The revocation endpoint a case describes (`options.revocation`); counts calls so offline cases
 * can prove they made none.
 * @example fakeRevocationFetch({ status: 200, body }, calls)
 */
export function fakeRevocationFetch(spec: any, calls: { n: number } = { n: 0 }): FetchLike {
  return async () => {
    calls.n++;
    if (!spec) throw new Error('this case gave no revocation answer: no network expected');
    if (spec.throws) throw new Error(spec.throws);
    const text = spec.text ?? JSON.stringify(spec.body);
    return { ok: spec.status >= 200 && spec.status < 300, status: spec.status, text: async () => text };
  };
}

/**
 * The trust a case's `options.trust` names (`form:keyName`). @example chainTrust('signingKeyPem:authority', k.input,
 * keys)
 */
export function chainTrust(trust: string, input: any, keys: OwnKeys): Partial<VerifyCtlOptions> {
  const [form, name] = trust.split(':') as [string, string | undefined];
  if (form === 'signingKeyPem') return { signingKeyPem: keys[name!]!.publicKeyPem };
  if (form === 'trustBundles+root')
    return { trustBundles: input.trustBundles, rootPublicKeyPem: keys[name!]!.publicKeyPem };
  if (form === 'jwks') return { jwks: input.jwks };
  if (form === 'none') return {};
  throw new Error('unknown trust form ' + trust);
}

/** verifyCtl options for a chain case. @example await verify(k.input.sba, chainOptions(k, file.keys, calls)) */
export function chainOptions(k: any, keys: OwnKeys, calls: { n: number } = { n: 0 }): VerifyCtlOptions {
  const o = k.options;
  return {
    amount: o.amount,
    currency: o.currency,
    merchantId: o.merchantId,
    rail: o.rail,
    purpose: o.purpose,
    asset: o.asset,
    requireIntentHash: o.requireIntentHash,
    clockToleranceMs: o.clockToleranceMs,
    trackSpend: o.trackSpend,
    trustedHumans: o.trustedHumans,
    offline: o.offline !== false,
    now: () => parseTimestamp(o.now, 'now'),
    fetch: fakeRevocationFetch(o.revocation, calls),
    ...chainTrust(o.trust, k.input, keys),
  };
}
