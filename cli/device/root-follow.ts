/**
 * What a device's refresh job does with the root chain (PROTOCOL.md §11): read its stored chain,
 * fetch the authority's (`GET /trust-root`), walk it from the pinned root with the stored version
 * as the floor, and replace the stored chain only with one that verifies and goes higher. The
 * stored chain file is the persisted "highest version accepted": it is never shortened, so an
 * older chain served later (a replay, a rolled-back authority) is `root_rollback` and ignored.
 */
import { parseStrictJson, verifyRootChain } from '../../src/index.js';
import { writeAtomic } from './args.js';
import { readChainFile } from './root-rotate.js';

export interface FollowResult {
  /** The chain in force (stored, or just accepted). */
  statements: unknown[];
  rootVersion: number;
  updated: boolean;
  /** Why the authority's chain was not taken, if it was not (the stored one stays in force). */
  problem?: string;
}

/**
 * @example const f = await followRootChain({ authority, rootPublicKeyPem, chainFile: '/var/lib/ctl/root-chain.json' })
 */
export async function followRootChain(o: {
  authority: string;
  rootPublicKeyPem: string;
  chainFile: string;
  fetch?: typeof fetch;
}): Promise<FollowResult> {
  const stored = readChainFile(o.chainFile);
  const mine = await verifyRootChain(o.rootPublicKeyPem, stored.statements);
  // A stored chain that no longer verifies is never silently replaced by "version 1": fail closed.
  if (!mine.valid)
    throw new Error(`${o.chainFile} does not verify from the pinned root: ${mine.error.code}: ${mine.error.message}`);
  const kept = (problem?: string): FollowResult => ({
    statements: stored.statements,
    rootVersion: mine.rootVersion,
    updated: false,
    ...(problem ? { problem } : {}),
  });
  const url = new URL('/trust-root', o.authority);
  let remote: unknown;
  try {
    const res = await (o.fetch ?? fetch)(url, {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(10_000),
      redirect: 'error',
    });
    if (res.status === 404) return kept(); // an authority that predates rotation: nothing to follow
    if (!res.ok) return kept(`${url} answered ${res.status}`);
    remote = (parseStrictJson(await res.text()) as { statements?: unknown })?.statements;
  } catch (e) {
    return kept(`${url}: ${(e as Error).message}`);
  }
  if (!Array.isArray(remote)) return kept(`${url} did not answer { statements: [...] }`);
  // Not below the stored version, and extending the stored chain (a leaked retired root key cannot fork it).
  const theirs = await verifyRootChain(o.rootPublicKeyPem, remote, {
    minVersion: mine.rootVersion,
    accepted: stored.statements,
  });
  if (!theirs.valid) return kept(`${theirs.error.code}: ${theirs.error.message}`);
  if (theirs.rootVersion === mine.rootVersion) return kept();
  writeAtomic(o.chainFile, JSON.stringify({ pinnedRootPem: o.rootPublicKeyPem, statements: remote }, null, 2) + '\n');
  return { statements: remote, rootVersion: theirs.rootVersion, updated: true };
}
