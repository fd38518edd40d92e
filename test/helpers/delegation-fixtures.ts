/** Delegation chains for tests (PROTOCOL.md §14): signed honestly, or as given (what a signer refuses). */
import {
  createDelegation,
  createSession,
  formatTimestamp,
  generateKeyPair,
  jwkThumbprint,
  type Delegation,
  type GeneratedKeyPair,
  type PolicyGrant,
} from '../../src/index.js';
import { signArtifact } from '../../src/artifacts/signing.js';
import { defaultCrypto } from '../../src/crypto/index.js';
import { grant, fakeAuthority, T0, HOUR, type Keys } from './fixtures.js';

export interface Chain {
  root: PolicyGrant;
  links: Delegation[];
  /** The private key of each holder: root's actor first, then each link's. */
  holders: GeneratedKeyPair[];
  leaf: PolicyGrant | Delegation;
}

/** A root grant allowing `maxDepth` and `depth` links below it, each a little narrower. */
export async function chain(k: Keys, depth: number, maxDepth = 4, alg: 'EdDSA' | 'ES256' = 'EdDSA'): Promise<Chain> {
  const root = await grant(k, { delegation: { maxDepth } });
  const holders: GeneratedKeyPair[] = [k.actor];
  const links: Delegation[] = [];
  let parent: PolicyGrant | Delegation = root;
  for (let i = 1; i <= depth; i++) {
    const key = await generateKeyPair({ alg });
    const d: Delegation = await createDelegation(
      parent,
      {
        actorKey: key.publicJwk,
        delegationId: `dlg-${i}`,
        maxAmountMinor: String(5000 - i * 500),
        expiresAt: formatTimestamp(T0 + (24 - i) * HOUR),
        issuedAt: formatTimestamp(T0 - 1000 + i),
      },
      { signingKey: holders[i - 1]!.privateKeyPem, now: () => T0 },
    );
    links.push(d);
    holders.push(key);
    parent = d;
  }
  return { root, links, holders, leaf: parent };
}

/**
 * Signs a delegation exactly as given (no narrowing check): what a hostile delegator could send.
 * `fields` override the honest members.
 */
export async function rawDelegation(
  parent: PolicyGrant | Delegation,
  signer: GeneratedKeyPair,
  fields: Record<string, unknown>,
): Promise<Delegation> {
  const unsigned: Record<string, unknown> = {
    version: 1,
    delegationId: 'dlg-raw',
    parent,
    actorKey: (await generateKeyPair()).publicJwk,
    maxAmountMinor: parent.maxAmountMinor,
    issuedAt: parent.issuedAt,
    expiresAt: parent.expiresAt,
    allowedRails: parent.allowedRails,
    allowedAssets: parent.allowedAssets,
    keyId: await jwkThumbprint(parent.actorKey),
    ...fields,
  };
  for (const key of ['allowedPurposes', 'destinationAllowlist', 'windows'] as const) {
    if (!(key in fields) && parent[key] !== undefined) unsigned[key] = parent[key];
  }
  for (const key of Object.keys(unsigned)) if (unsigned[key] === undefined) delete unsigned[key];
  return (await signArtifact(defaultCrypto, 'delegation', unsigned, signer.privateKeyPem)) as unknown as Delegation;
}

/** An SBA signed by the leaf's holder, through a wallet session on the leaf. */
export async function sbaUnder(
  k: Keys,
  leaf: PolicyGrant | Delegation,
  holder: GeneratedKeyPair,
  amount = '30',
  fetch = fakeAuthority(k).fetch,
) {
  const s = createSession(leaf, { actorId: 'sub-agent', signingKey: holder.privateKeyPem, fetch, now: () => T0 });
  return s.createSba({ amount, currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'api:search' });
}
