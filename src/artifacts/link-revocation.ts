/**
 * How a delegation link is revoked (PROTOCOL.md §14): by a hash of everything it signs, asked at
 * the root grant's revocation URL; and the replay scope of an SBA drawn under a chain (§7). With
 * the delegation artifact, for the wallet, the verifier, the authority and the gateway alike.
 */
import type { Delegation, PolicyGrant } from './types.js';
import type { DelegationChain } from './delegation.js';
import { linkTexts, type LinkText } from './chain-text.js';
import { canonicalize } from '../encoding/jcs.js';
import { utf8Encode } from '../encoding/utf8.js';
import { sha256HexSync } from '../crypto/index.js';

/**
 * The id a link is revoked by (PROTOCOL.md §14): hex SHA-256 of JCS of the link without its
 * signature, so of everything it signs, its whole chain included. Never its `delegationId` alone:
 * any delegator may give its own link another tree's delegation id, or a grant's id, and revoke
 * it; the signature is left out because an ES256 signature can be re-encoded by anyone (§3).
 * @example linkRevocationId(sba.grant) // '3f1c...' (64 hex)
 */
export function linkRevocationId(link: Delegation): string {
  const { signature: _s, ...signed } = link;
  return revocationIdOf(canonicalize(signed));
}

/** `linkRevocationId` of a link whose signed text is at hand (`LinkText.signed`). */
const revocationIdOf = (signedText: string): string => sha256HexSync(utf8Encode(signedText));

/**
 * Every id revocation must ask about, root first (the root grant's id, then each link's
 * `linkRevocationId`), with a name for messages: a revoked link revokes everything below it.
 * `texts`: the chain's `linkTexts` when the caller has them (each link's text is then hashed, not written again).
 * @example for (const { id } of chainIds(chainOf(sba.grant))) await check(id)
 */
export function chainIds(
  chain: DelegationChain,
  texts: readonly LinkText[] = linkTexts(chain),
): { id: string; name: string }[] {
  return [
    { id: chain.root.grantId, name: 'the grant' },
    ...chain.links.map((l, i) => ({ id: revocationIdOf(texts[i]!.signed), name: `delegation ${l.delegationId}` })),
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
 * @example linkRevocationUrl(root, linkRevocationId(link)) // 'https://a.example/revoke?grantId=3f1c…&rootGrantId=g1'
 */
export function linkRevocationUrl(root: PolicyGrant, id: string): string {
  const q = root.revocationUrl.indexOf('?');
  const base = q < 0 ? root.revocationUrl : root.revocationUrl.slice(0, q);
  // The root's id beside it: an authority that never saw the delegation knows the root it hangs from.
  return `${base}?grantId=${encodeURIComponent(id)}&rootGrantId=${encodeURIComponent(root.grantId)}`;
}
