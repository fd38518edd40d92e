/**
 * What a payment under a delegation chain counts in besides the root grant (PROTOCOL.md §14): each
 * link's ledgers, charged leaf to root in the one reservation of §13. Shared by the wallet and the
 * verifier; the ids revocation asks for are the delegation artifact's (artifacts/link-revocation.ts).
 */
import type { PolicyGrant } from '../artifacts/types.js';
import type { DelegationChain } from '../artifacts/delegation.js';
import { windowLedgers, type Ledger } from './ledgers.js';

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
