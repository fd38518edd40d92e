/**
 * A rotated fleet root for tests (PROTOCOL.md §11): version 1 is the fixtures' pinned root;
 * version 2 a single new root key with its own bundle key; version 3 a 2-of-3 root set (a, b, c)
 * with a third bundle key; `rotate4` recovers a compromised bundle key with version 4.
 */
import {
  createRootStatement,
  createTrustBundle,
  formatTimestamp,
  generateKeyPair,
  type GeneratedKeyPair,
  type RootStatement,
} from '../../src/index.js';
import { authorityJwks, HOUR, T0, type Keys } from './fixtures.js';

export interface RotatedRoot {
  r2: GeneratedKeyPair;
  a: GeneratedKeyPair;
  b: GeneratedKeyPair;
  c: GeneratedKeyPair;
  bk2: GeneratedKeyPair;
  bk3: GeneratedKeyPair;
  bk4: GeneratedKeyPair;
  s2: RootStatement;
  s3: RootStatement;
}

const at = (h: number) => formatTimestamp(T0 + h * HOUR);

/** `k.root` is the pinned version-1 root. */
export async function rotatedRoot(k: { root: { privateKeyPem: string } }): Promise<RotatedRoot> {
  const [r2, a, b, c, bk2, bk3, bk4] = await Promise.all(
    Array.from({ length: 7 }, () => generateKeyPair({ alg: 'EdDSA' })),
  );
  const s2 = await createRootStatement(
    { rootVersion: 2, keys: [r2!.publicJwk], threshold: 1, bundleKeys: [bk2!.publicJwk], issuedAt: at(-48) },
    { signers: [{ key: k.root.privateKeyPem }, { key: r2!.privateKeyPem }] },
  );
  const s3 = await createRootStatement(
    {
      rootVersion: 3,
      keys: [a!.publicJwk, b!.publicJwk, c!.publicJwk],
      threshold: 2,
      bundleKeys: [bk3!.publicJwk],
      issuedAt: at(-24),
    },
    { signers: [{ key: r2!.privateKeyPem }, { key: a!.privateKeyPem }, { key: c!.privateKeyPem }] },
  );
  return { r2: r2!, a: a!, b: b!, c: c!, bk2: bk2!, bk3: bk3!, bk4: bk4!, s2, s3 };
}

/** Version 4: the same 2-of-3 root set (b and c sign), a new bundle key: the old one (compromised) is retired. */
export function rotate4(r: RotatedRoot): Promise<RootStatement> {
  return createRootStatement(
    {
      rootVersion: 4,
      keys: [r.a.publicJwk, r.b.publicJwk, r.c.publicJwk],
      threshold: 2,
      bundleKeys: [r.bk4.publicJwk],
      issuedAt: at(-1),
    },
    { signers: [{ key: r.b.privateKeyPem }, { key: r.c.privateKeyPem }] },
  );
}

/** A bundle as the fixtures make it, signed by `signer` (a root or bundle key). */
export function bundleBy(
  k: Keys,
  signer: GeneratedKeyPair,
  over: { sequence?: number; revokedGrants?: string[] } = {},
) {
  return createTrustBundle(
    {
      sequence: over.sequence ?? 1,
      scope: { category: 'ev-charging' },
      issuers: [{ issuer: 'authority.test', keys: authorityJwks(k).keys }],
      revokedGrants: over.revokedGrants ?? [],
      issuedAt: formatTimestamp(T0 - 1000),
      expiresAt: formatTimestamp(T0 + 24 * HOUR),
    },
    { signingKey: signer.privateKeyPem, issuer: 'root.test' },
  );
}
