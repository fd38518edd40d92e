/**
 * x402 `upto` needs the payer's ERC-20 allowance to Permit2 (a one-time on-chain approve): read
 * before anything is reserved or signed when the network has a reader; without one, the
 * merchant's 412 `permit2_allowance_required` says so after the permit was sent. And the chain's
 * head when a permit is signed, where the search for its settle starts.
 */
import { HttpError } from '../../../../service-kit/index.js';
import { PERMIT2_ADDRESS, permit2Allowance } from '../../evm/permit2.js';
import type { SchemeDeps } from '../scheme.js';

export interface Permit2Check {
  /** Throws `payment_failed` when the reader shows an allowance below `max`; nothing reserved then. */
  allowance(network: string, asset: string, max: bigint): Promise<void>;
  /** The chain's head on `network` (undefined without a reader that numbers blocks, or when it fails). */
  head(network: string): Promise<bigint | undefined>;
  /** What to do about a missing allowance, for the agent. */
  missing(asset: string): string;
}

export function createPermit2Check(evm: SchemeDeps['evm']): Permit2Check {
  const missing = (asset: string) =>
    `x402 upto: the gateway's account ${evm.account.address} has not approved Permit2 (${PERMIT2_ADDRESS}) for ` +
    `${asset}: send approve(Permit2, amount) from it once (CTL_GATEWAY_EVM_PRIVATE_KEY's account)`;
  return {
    missing,
    async allowance(network, asset, max) {
      const reader = evm.chain?.(network);
      if (!reader) return;
      const allowance = await permit2Allowance(reader, asset, evm.account.address).catch(() => undefined);
      if (allowance !== undefined && allowance < max)
        throw new HttpError(502, 'payment_failed', `${missing(asset)}; nothing was reserved or signed`);
    },
    async head(network) {
      const reader = evm.chain?.(network);
      return reader?.getBlockNumber ? reader.getBlockNumber({ cacheTime: 0 }).catch(() => undefined) : undefined;
    },
  };
}
