/**
 * Permit2's signature transfers and x402's `upto` proxy, as contracts of the in-memory ledger
 * (evm-ledger.ts). No local EVM is installed with the project, and x402's proxy bytecode ships in no
 * package, so their semantics are modelled here, honestly, in their on-chain order:
 *
 * - proxy `settle(permit, amount, owner, witness, signature)`: `amount` ≤ the permitted maximum and
 *   not zero, owner and destination set, the caller is the witness's facilitator, not before
 *   `validAfter`; then it calls Permit2 as the spender;
 * - Permit2 `permitWitnessTransferFrom`: not past `deadline`, requested ≤ permitted, the unordered
 *   nonce unused (one bit of `nonceBitmap(owner, nonce >> 8)`), the owner's EIP-712 signature over
 *   `PermitWitnessTransferFrom` in Permit2's domain with `spender` = the proxy (recovered, not
 *   trusted), then the token's `transferFrom(owner, to, amount)` against owner's allowance to Permit2.
 *
 * All checks pass before anything is written, as a reverted transaction leaves no trace.
 */
import { getAddress, parseAbi, verifyTypedData, type Hex } from 'viem';

export const PERMIT2_ADDRESS = '0x000000000022D473030F116dDEE9F6B43aC78BA3';
export const UPTO_PROXY_ADDRESS = '0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002';
/** An allowance this large is never spent down (ERC-20 convention, and Permit2's own). */
export const MAX_UINT256 = 2n ** 256n - 1n;

export const PERMIT2_ABI = parseAbi([
  'function nonceBitmap(address owner, uint256 wordPos) view returns (uint256)',
  'function DOMAIN_SEPARATOR() view returns (bytes32)',
]);

export const UPTO_PROXY_ABI = parseAbi([
  'struct TokenPermissions { address token; uint256 amount; }',
  'struct PermitTransferFrom { TokenPermissions permitted; uint256 nonce; uint256 deadline; }',
  'struct Witness { address to; address facilitator; uint256 validAfter; }',
  'function PERMIT2() view returns (address)',
  'function settle(PermitTransferFrom permit, uint256 amount, address owner, Witness witness, bytes signature)',
  'event Settled()',
]);

/** The witness type Permit2 hashes for the `upto` proxy (its WITNESS_TYPE_STRING). */
const WITNESS_TYPES = {
  PermitWitnessTransferFrom: [
    { name: 'permitted', type: 'TokenPermissions' },
    { name: 'spender', type: 'address' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
    { name: 'witness', type: 'Witness' },
  ],
  TokenPermissions: [
    { name: 'token', type: 'address' },
    { name: 'amount', type: 'uint256' },
  ],
  Witness: [
    { name: 'to', type: 'address' },
    { name: 'facilitator', type: 'address' },
    { name: 'validAfter', type: 'uint256' },
  ],
} as const;

interface Permit {
  permitted: { token: Hex; amount: bigint };
  nonce: bigint;
  deadline: bigint;
}
interface Witness {
  to: Hex;
  facilitator: Hex;
  validAfter: bigint;
}

/** What the two contracts need from the ledger they live on. */
export interface LedgerState {
  chainId: number;
  now(): bigint;
  balanceOf(who: string): bigint;
  allowance(owner: string, spender: string): bigint;
  /** Token `transferFrom` by `spender`: allowance spent (unless unlimited), balance moved. */
  transferFrom(spender: string, from: string, to: string, value: bigint): void;
  /** Reverts: records the reason and throws. */
  fail(reason: string): never;
}

export interface Permit2Settlement {
  owner: string;
  to: string;
  token: string;
  amount: bigint;
  permitted: bigint;
  nonce: bigint;
}

export function createPermit2(state: LedgerState) {
  /** Permit2's unordered nonces: one 256-bit word per (owner, nonce >> 8). */
  const bitmaps = new Map<string, bigint>();
  const word = (owner: string, pos: bigint) => bitmaps.get(`${owner.toLowerCase()}:${pos}`) ?? 0n;
  const zero = (a: string) => BigInt(a) === 0n;

  /** Every check of proxy `settle` and Permit2 `permitWitnessTransferFrom`; `write` applies them. */
  async function settle(sender: string, args: readonly unknown[], write: boolean): Promise<Permit2Settlement | null> {
    const [permit, amount, owner, witness, signature] = args as [Permit, bigint, Hex, Witness, Hex];
    // x402UptoPermit2Proxy
    if (amount > permit.permitted.amount) state.fail('AmountExceedsPermitted()');
    if (amount === 0n) state.fail('InvalidAmount()');
    if (zero(owner)) state.fail('InvalidOwner()');
    if (zero(witness.to)) state.fail('InvalidDestination()');
    if (sender.toLowerCase() !== witness.facilitator.toLowerCase()) state.fail('UnauthorizedFacilitator()');
    if (state.now() < witness.validAfter) state.fail('PaymentTooEarly()');
    // Permit2 SignatureTransfer, called by the proxy
    if (state.now() > permit.deadline) state.fail(`SignatureExpired(${permit.deadline})`);
    if (amount > permit.permitted.amount) state.fail(`InvalidAmount(${permit.permitted.amount})`);
    const pos = permit.nonce >> 8n;
    const bit = 1n << (permit.nonce & 0xffn);
    if (word(owner, pos) & bit) state.fail('InvalidNonce()');
    let ok = false;
    try {
      ok = await verifyTypedData({
        address: owner,
        domain: { name: 'Permit2', chainId: state.chainId, verifyingContract: PERMIT2_ADDRESS },
        types: WITNESS_TYPES,
        primaryType: 'PermitWitnessTransferFrom',
        message: { ...permit, spender: UPTO_PROXY_ADDRESS, witness },
        signature,
      });
    } catch {
      ok = false;
    }
    if (!ok) state.fail('InvalidSigner()');
    // solmate SafeTransferLib: the token's transferFrom must succeed
    if (state.allowance(owner, PERMIT2_ADDRESS) < amount || state.balanceOf(owner) < amount)
      state.fail('TRANSFER_FROM_FAILED');
    if (!write) return null;
    bitmaps.set(`${owner.toLowerCase()}:${pos}`, word(owner, pos) | bit);
    state.transferFrom(PERMIT2_ADDRESS, owner, witness.to, amount);
    return {
      owner: owner.toLowerCase(),
      to: witness.to.toLowerCase(),
      token: permit.permitted.token.toLowerCase(),
      amount,
      permitted: permit.permitted.amount,
      nonce: permit.nonce,
    };
  }

  return {
    /** Views of Permit2 and the proxy; `settle` here is an `eth_call` (a simulation). */
    async read(address: string, functionName: string, args: readonly unknown[], sender: string): Promise<unknown> {
      const a = getAddress(address);
      if (a === PERMIT2_ADDRESS && functionName === 'nonceBitmap') return word(args[0] as string, args[1] as bigint);
      if (a === UPTO_PROXY_ADDRESS && functionName === 'PERMIT2') return PERMIT2_ADDRESS;
      if (a === UPTO_PROXY_ADDRESS && functionName === 'settle') return settle(sender, args, false);
      return state.fail(`unknown function ${functionName} at ${address}`);
    },
    /** A transaction to the proxy's `settle` from `sender`. */
    write: (sender: string, args: readonly unknown[]) => settle(sender, args, true) as Promise<Permit2Settlement>,
  };
}
