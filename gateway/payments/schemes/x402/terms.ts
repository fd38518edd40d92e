/**
 * Which 402 is this? x402 v2 puts its terms in a `PAYMENT-REQUIRED` header (base64
 * JSON, `accepts[].amount`); x402 v1 in a JSON body `{ x402Version: 1, accepts }` (`accepts[]
 * .maxAmountRequired`, network names such as `base-sepolia`); the spec's own terms in
 * `X-Payment` (spec §2.6, x-payment.ts). Every x402 requirement is normalised to one shape
 * (amount in atomic units, asset, network in CAIP-2, payee) before any policy looks at it, so the
 * policy below is written once for both versions.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import type { PaymentRequired, PaymentRequirements, PaymentRequiredV1, PaymentRequirementsV1 } from '@x402/core/types';
import { EVM_NETWORK_CHAIN_ID_MAP } from '@x402/evm/v1';
import { CtlError } from '../../../../src/index.js';
import { MAX_AMOUNT } from '../../../../service-kit/amount.js';
import { CAIP2_EVM, EVM_ADDRESS, assetAllowed, type X402AssetMap } from '../../evm/assets.js';

/** Which x402 protocol version a 402 spoke. */
export type X402Version = 'x402-v2' | 'x402-v1';

/** One accepted way to pay, whatever the version it came in. */
export interface NormalisedRequirement {
  scheme: string;
  /** CAIP-2; v1 names are mapped (`base-sepolia` → `eip155:84532`). */
  network: string;
  /** Token contract, lower case. */
  asset: string;
  /** Atomic units of the asset (PROTOCOL.md §1: the session's minor unit for a mapped asset). */
  amount: bigint;
  /** The merchant's pay-to address, lower case. */
  payTo: string;
  maxTimeoutSeconds: number;
  /** `extra.assetTransferMethod` (absent means EIP-3009 for the exact EVM scheme). */
  transferMethod: string | undefined;
  /** `extra.facilitatorAddress`, lower case: the only account an `upto` permit lets settle. */
  facilitator: string | undefined;
  /** Exactly what the merchant sent: what the client signs against. */
  raw: PaymentRequirements | PaymentRequirementsV1;
}

export interface X402Terms {
  version: X402Version;
  paymentRequired: PaymentRequired | PaymentRequiredV1;
  /** Well-formed requirements, in the merchant's order. */
  requirements: NormalisedRequirement[];
  /** Why the other entries of `accepts` were not understood. */
  malformed: string[];
}

const MAX_HEADER = 16 * 1024;
const MAX_V1_BODY = 64 * 1024;
const ATOMIC = /^(0|[1-9][0-9]{0,77})$/;
const V1_NETWORKS = EVM_NETWORK_CHAIN_ID_MAP as Record<string, number>;

const refuse = (why: string) => new CtlError('payment_terms_refused', why);
const one = (v: string | string[] | undefined) => (Array.isArray(v) ? (v.length === 1 ? v[0] : undefined) : v);

/**
 * Recognises an x402 402 (v2 header first, then a v1 body). Undefined when the response is not
 * x402 at all (the spec's `X-Payment`, or a 402 the gateway passes through). Throws
 * `payment_terms_refused` when it is x402 but cannot be read: the gateway signs nothing it does
 * not fully understand (PROTOCOL.md §9).
 * @example detectX402({ status: 402, headers: { 'payment-required': header }, body })
 */
export function detectX402(res: { status: number; headers: IncomingHttpHeaders; body: Buffer }): X402Terms | undefined {
  if (res.status !== 402) return undefined;
  const header = res.headers['payment-required'];
  if (header !== undefined) {
    const h = one(header);
    if (h === undefined || h.length > MAX_HEADER) throw refuse('PAYMENT-REQUIRED: repeated or too long');
    let pr: PaymentRequired;
    try {
      pr = decodePaymentRequiredHeader(h);
    } catch {
      throw refuse('PAYMENT-REQUIRED: not base64 JSON');
    }
    if (!isObject(pr) || pr.x402Version !== 2 || !Array.isArray(pr.accepts))
      throw refuse('PAYMENT-REQUIRED: not an x402 v2 PaymentRequired (x402Version 2, accepts)');
    return normalise('x402-v2', pr);
  }
  if (res.headers['x-payment'] !== undefined) return undefined; // the spec's X-Payment terms
  if (res.body.length === 0 || res.body.length > MAX_V1_BODY || res.body[0] !== 0x7b /* { */) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(res.body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (!isObject(body) || body.x402Version !== 1 || !('accepts' in body)) return undefined;
  if (!Array.isArray(body.accepts)) throw refuse('x402 v1: accepts must be an array');
  return normalise('x402-v1', body as unknown as PaymentRequiredV1);
}

function normalise(version: X402Version, pr: PaymentRequired | PaymentRequiredV1): X402Terms {
  const requirements: NormalisedRequirement[] = [];
  const malformed: string[] = [];
  (pr.accepts as unknown[]).slice(0, 32).forEach((a, i) => {
    const r = version === 'x402-v2' ? normaliseV2(a) : normaliseV1(a);
    if (typeof r === 'string') malformed.push(`accepts[${i}]: ${r}`);
    else requirements.push(r);
  });
  return { version, paymentRequired: pr, requirements, malformed };
}

function common(a: Record<string, unknown>, network: string, amount: unknown): NormalisedRequirement | string {
  if (typeof a.scheme !== 'string') return 'scheme must be a string';
  if (typeof amount !== 'string' || !ATOMIC.test(amount) || amount === '0')
    return 'amount must be a positive decimal string of atomic units';
  if (typeof a.asset !== 'string' || !EVM_ADDRESS.test(a.asset)) return 'asset must be a 0x token address';
  if (typeof a.payTo !== 'string' || !EVM_ADDRESS.test(a.payTo)) return 'payTo must be a 0x address';
  if (!Number.isSafeInteger(a.maxTimeoutSeconds) || (a.maxTimeoutSeconds as number) <= 0)
    return 'maxTimeoutSeconds must be a positive integer';
  const extra = a.extra;
  if (extra !== undefined && !isObject(extra)) return 'extra must be an object';
  const method = (extra as Record<string, unknown> | undefined)?.assetTransferMethod;
  const facilitator = (extra as Record<string, unknown> | undefined)?.facilitatorAddress;
  return {
    scheme: a.scheme,
    network,
    asset: a.asset.toLowerCase(),
    amount: BigInt(amount),
    payTo: a.payTo.toLowerCase(),
    maxTimeoutSeconds: a.maxTimeoutSeconds as number,
    transferMethod: typeof method === 'string' ? method : undefined,
    facilitator:
      typeof facilitator === 'string' && EVM_ADDRESS.test(facilitator) ? facilitator.toLowerCase() : undefined,
    raw: a as unknown as PaymentRequirements,
  };
}

function normaliseV2(a: unknown): NormalisedRequirement | string {
  if (!isObject(a)) return 'not an object';
  if (typeof a.network !== 'string') return 'network must be a string';
  return common(a, a.network, a.amount);
}

function normaliseV1(a: unknown): NormalisedRequirement | string {
  if (!isObject(a)) return 'not an object';
  if (typeof a.network !== 'string') return 'network must be a string';
  const chainId = Object.prototype.hasOwnProperty.call(V1_NETWORKS, a.network) ? V1_NETWORKS[a.network] : undefined;
  // v1 names only EVM networks the official package knows; anything else stays as named and
  // fails the asset map below.
  return common(a, chainId !== undefined ? `eip155:${chainId}` : a.network, a.maxAmountRequired);
}

/**
 * The gateway's terms policy, run before any budget check or signature: the exact
 * EVM scheme with an EIP-3009 transfer, or (v2) the `upto` EVM scheme with a Permit2 transfer and
 * its facilitator named, whose `amount` is a maximum held then captured (PROTOCOL.md §15); an
 * asset the map allows for the session's currency, a validity no longer than `maxTimeoutSeconds`.
 * Of what is left, the cheapest (for `upto`, the lowest maximum). Throws `asset_not_allowed` or
 * `payment_terms_refused`.
 */
export function chooseRequirement(
  terms: X402Terms,
  o: { currency: string; assets: X402AssetMap; maxTimeoutSeconds: number },
): NormalisedRequirement {
  const payable = terms.requirements.filter(
    (r) =>
      CAIP2_EVM.test(r.network) &&
      ((r.scheme === 'exact' && (r.transferMethod === undefined || r.transferMethod === 'eip3009')) ||
        (r.scheme === 'upto' &&
          terms.version === 'x402-v2' &&
          r.transferMethod === 'permit2' &&
          r.facilitator !== undefined)),
  );
  if (payable.length === 0) {
    const seen = terms.requirements.map((r) => `${r.scheme} on ${r.network}`).concat(terms.malformed);
    const payableKinds = 'exact EVM with EIP-3009, v2 upto EVM with Permit2';
    throw refuse(
      `no x402 requirement the gateway can pay (${payableKinds})${seen.length ? `: ${seen.join('; ')}` : ''}`,
    );
  }
  const mapped = payable.filter((r) => assetAllowed(o.assets, o.currency, r.network, r.asset));
  if (mapped.length === 0) {
    const offered = payable.map((r) => `${r.asset} on ${r.network}`).join(', ');
    throw new CtlError(
      'asset_not_allowed',
      `the merchant asks for ${offered}; none of them pays a ${o.currency} budget (CTL_X402_ASSETS)`,
    );
  }
  const timely = mapped.filter((r) => r.maxTimeoutSeconds <= o.maxTimeoutSeconds);
  if (timely.length === 0) {
    throw refuse(
      `maxTimeoutSeconds ${mapped[0]!.maxTimeoutSeconds} is above the gateway's ${o.maxTimeoutSeconds}: ` +
        `a signed authorization would stay cashable, and hold the session's budget, too long`,
    );
  }
  const sized = timely.filter((r) => r.amount <= MAX_AMOUNT);
  if (sized.length === 0) throw refuse('amount is too large');
  return sized.reduce((best, r) => (r.amount < best.amount ? r : best));
}

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
