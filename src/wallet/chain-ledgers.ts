/**
 * What a payment under a delegation chain touches besides the root grant (PROTOCOL.md §14): the
 * ids revocation asks for, and each link's ledgers, charged leaf to root in the one reservation
 * of §13. Shared by the wallet and the verifier.
 */
import type { Delegation, PolicyGrant } from '../artifacts/types.js';
import type { DelegationChain } from '../artifacts/delegation.js';
import { canonicalize } from '../encoding/jcs.js';
import { utf8Encode } from '../encoding/utf8.js';
import { sha256HexSync } from '../crypto/index.js';
import { windowLedgers, type Ledger } from './ledgers.js';

/**
 * The id a link is revoked by (PROTOCOL.md §14): hex SHA-256 of JCS of the link without its
 * signature, so of everything it signs, its whole chain included. Never its `delegationId` alone:
 * any delegator may give its own link another tree's delegation id, or a grant's id, and revoke
 * it; the signature is left out because an ES256 signature can be re-encoded by anyone (§3).
 * @example linkRevocationId(sba.grant) // '3f1c...' (64 hex)
 */
export function linkRevocationId(link: Delegation): string {
  const { signature: _s, ...signed } = link;
  return sha256HexSync(utf8Encode(canonicalize(signed)));
}

/**
 * Every id revocation must ask about, root first (the root grant's id, then each link's
 * `linkRevocationId`), with a name for messages: a revoked link revokes everything below it.
 */
export function chainIds(chain: DelegationChain): { id: string; name: string }[] {
  return [
    { id: chain.root.grantId, name: 'the grant' },
    ...chain.links.map((l) => ({ id: linkRevocationId(l), name: `delegation ${l.delegationId}` })),
  ];
}

/**
 * The replay scope of an SBA (PROTOCOL.md §7): the chain that signed it, never anything that
 * changes with time. Under a plain grant, `<prefix><grantId>` (the grant's own ledger key); under
 * a chain, the root's id and the leaf's revocation id (128 bits of it: it covers every link above),
 * so a stranger's chain, or a sibling given the same `delegationId`, never shares the scope.
 * `leafRevocationId`: the leaf's `linkRevocationId` when the caller has it (`chainIds`).
 * @example chainScope(chain, 'grant:') // 'grant:g1' or 'grant:g1#3f1c…'
 */
export function chainScope(chain: DelegationChain, prefix: string, leafRevocationId?: string): string {
  const base = `${prefix}${chain.root.grantId}`;
  const leaf = chain.links[chain.links.length - 1];
  if (!leaf) return base;
  return `${base}#${(leafRevocationId ?? linkRevocationId(leaf)).slice(0, 32)}`;
}

/**
 * The revocation URL of a link: its id asked at the root grant's `revocationUrl` base
 * (PROTOCOL.md §14), `<base>/revoke?grantId=<id>&rootGrantId=<root id>`.
 */
export function linkRevocationUrl(root: PolicyGrant, id: string): string {
  const q = root.revocationUrl.indexOf('?');
  const base = q < 0 ? root.revocationUrl : root.revocationUrl.slice(0, q);
  // The root's id beside it: an authority that never saw the delegation knows the root it hangs from.
  return `${base}?grantId=${encodeURIComponent(id)}&rootGrantId=${encodeURIComponent(root.grantId)}`;
}

/**
 * The ledgers of the links (the root's are the caller's): each link's ceiling and windows, keyed
 * by its path from the root so that a link's total is its own and every payment below it adds to
 * it (PROTOCOL.md §14: the sum spent below a link never exceeds its ceiling). `prefix` keeps the
 * wallet's keys apart from a verifier's on one storage.
 * @example reserveAll(storage, [...rootLedgers, ...linkLedgers(chain, 'grant:', amount, now)], budgetId)
 */
export function linkLedgers(chain: DelegationChain, prefix: string, amount: bigint, now: number): Ledger[] {
  const out: Ledger[] = [];
  let path = chain.root.grantId;
  for (const link of chain.links) {
    path += `/${link.delegationId}`;
    out.push({
      key: `${prefix}${path}`,
      amount,
      ceiling: BigInt(link.maxAmountMinor),
      code: 'budget_exceeded',
      what: `the ${link.maxAmountMinor} minor units of delegation ${link.delegationId}`,
      // One payment counts in every link and the root, all or none (PROTOCOL.md §13, §14).
      needsAtomic: true,
    });
    if (link.windows) {
      // Windows per link, counted from the link's own start, keyed by its path (PROTOCOL.md §13).
      const asGrant = {
        grantId: `${prefix}${path}`,
        currency: chain.root.currency,
        issuedAt: link.issuedAt,
        windows: link.windows,
        ...(link.windowsStart !== undefined ? { windowsStart: link.windowsStart } : {}),
      } as unknown as PolicyGrant;
      out.push(...windowLedgers(asGrant, amount, now));
    }
  }
  return out;
}
