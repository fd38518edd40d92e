/**
 * The canonical texts of a delegation chain (PROTOCOL.md §14), each written once. A link's text
 * holds its parent's whole text, so canonicalizing each link on its own writes the root once per
 * link and the chain's cost grows with the square of its depth. Here each link's own members are
 * written once and its parent's text, already written, is put in its place.
 */
import type { DelegationChain } from './delegation.js';
import { DELEGATION_MEMBERS } from './delegation.js';
import { canonicalize, isEnumerable, quoteJson } from '../encoding/jcs.js';

/** One link's texts: as `canonicalize` writes them, from the same members. */
export interface LinkText {
  /**
   * JCS of the link without `signature`: what it signs after `ctl-delegation/1\n` (PROTOCOL.md §3), and
   * what its revocation id hashes (§14).
   */
  signed: string;
  /** JCS of the whole link: what its child embeds as `parent`, and an SBA under it as `grant`. */
  whole: string;
}

/**
 * The texts of every link of a checked chain, root first; `rootText` is `canonicalize(chain.root)`
 * when the caller has it. Equal to `canonicalize` of each link (and of it without `signature`): a
 * delegation is a closed object (PROTOCOL.md §3), so its members and their order are known.
 * @example linkTexts(chainOf(sba.grant)).at(-1)!.whole === canonicalize(sba.grant) // true
 */
export function linkTexts(chain: DelegationChain, rootText: string = canonicalize(chain.root)): LinkText[] {
  const out: LinkText[] = [];
  let parentText = rootText;
  for (const link of chain.links) {
    const members = link as unknown as Record<string, unknown>;
    let signed = '';
    let whole = '';
    for (const k of DELEGATION_MEMBERS) {
      if (k === 'signature') {
        whole += (whole ? ',' : '') + '"signature":' + quoteJson(link.signature);
        continue;
      }
      // A member as canonicalize has it: own, enumerable, not undefined (an absent optional member).
      const x = isEnumerable.call(members, k) ? members[k] : undefined;
      const v = k === 'parent' ? parentText : x === undefined ? undefined : canonicalize(x);
      if (v === undefined) continue;
      const member = '"' + k + '":' + v;
      signed += (signed ? ',' : '') + member;
      whole += (whole ? ',' : '') + member;
    }
    out.push({ signed: '{' + signed + '}', whole: '{' + whole + '}' });
    parentText = out[out.length - 1]!.whole;
  }
  return out;
}
