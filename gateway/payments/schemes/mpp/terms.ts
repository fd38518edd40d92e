/**
 * The Machine Payments Protocol's 402 (the `Payment` HTTP authentication scheme, as the stock
 * `mppx` server issues it): one or more `WWW-Authenticate: Payment id=…, realm=…, method=…,
 * intent=…, request=<base64url JSON>, expires=…` challenges, read with mppx's own parser. The
 * gateway pays the `evm` method's `charge` intent: an EIP-3009 `transferWithAuthorization` of
 * `request.amount` atomic units of `request.currency` (a token) to `request.recipient` on
 * `methodDetails.chainId`. Every other method or intent (tempo, stripe, sessions…) is read but
 * not paid: the gateway signs nothing it does not fully understand (PROTOCOL.md §9).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Challenge } from 'mppx';
import { CtlError } from '../../../../src/index.js';
import { MAX_AMOUNT } from '../../../../service-kit/amount.js';
import { CAIP2_EVM, assetAllowed, type X402AssetMap } from '../../evm/assets.js';

/** One `evm` `charge` challenge, normalised (lower-case addresses, CAIP-2 network, atomic amount). */
export interface MppCharge {
  /** Exactly what mppx parsed from the merchant's header: what the stock client signs against. */
  challenge: Challenge.Challenge;
  network: string;
  asset: string;
  amount: bigint;
  payTo: string;
  /** Epoch ms of the challenge's `expires` (the authorization's `validBefore`); undefined when absent. */
  expiresAt: number | undefined;
}

export interface MppTerms {
  /** The `evm` `charge` challenges, in the merchant's order. */
  charges: MppCharge[];
  /** Why each other challenge is not payable (`method/intent: reason`). */
  other: string[];
}

const MAX_HEADER = 32 * 1024;
/** Where the credential may go: the scheme's default and its alternate field, nothing the forwarder owns. */
const CREDENTIAL_HEADERS = new Set(['authorization', 'payment-authorization']);

const refuse = (why: string) => new CtlError('payment_terms_refused', `MPP: ${why}`);

/**
 * Recognises an MPP 402: undefined when it carries no `Payment` challenge, or when none of its
 * challenges is an `evm` `charge` and the merchant also offers x402 terms (the next protocol pays
 * those). Throws `payment_terms_refused` for a `Payment` challenge that cannot be read, or one
 * whose every challenge is a method or intent the gateway does not pay.
 * @example detectMpp({ status: 402, headers: { 'www-authenticate': 'Payment id="…", …' }, body })
 */
export function detectMpp(res: { status: number; headers: IncomingHttpHeaders; body: Buffer }): MppTerms | undefined {
  if (res.status !== 402) return undefined;
  const raw = res.headers['www-authenticate'];
  const header = Array.isArray(raw) ? raw.join(', ') : raw;
  if (header === undefined || !/(^|,)\s*payment\s/i.test(header)) return undefined;
  if (header.length > MAX_HEADER) throw refuse('WWW-Authenticate is too long');
  let challenges: Challenge.Challenge[];
  try {
    challenges = mods().Challenge.deserializeList(header);
  } catch (e) {
    // A `Payment` token inside another scheme's quoted value is no MPP challenge.
    if (/No Payment schemes found/.test((e as Error)?.message ?? '')) return undefined;
    throw refuse(`a Payment challenge cannot be read (${(e as Error)?.message ?? 'error'})`);
  }
  const charges: MppCharge[] = [];
  const other: string[] = [];
  for (const c of challenges.slice(0, 16)) {
    const r = normalise(c);
    if (typeof r === 'string') other.push(`${c.method}/${c.intent}: ${r}`);
    else charges.push(r);
  }
  if (charges.length === 0 && res.headers['payment-required'] !== undefined) return undefined;
  if (charges.length === 0) throw refuse(`no challenge the gateway can pay (evm charge): ${other.join('; ')}`);
  return { charges, other };
}

function normalise(c: Challenge.Challenge): MppCharge | string {
  if (c.method !== 'evm') return 'a payment method the gateway does not pay';
  if (c.intent !== 'charge') return 'an intent the gateway does not pay';
  const parsed = mods().evm.ChargeRequestSchema.safeParse(c.request);
  if (!parsed.success) return 'request is not an evm charge request';
  const r = parsed.data;
  const network = `eip155:${r.methodDetails.chainId}`;
  if (!CAIP2_EVM.test(network)) return 'chainId must be a positive integer';
  if (!(r.methodDetails.credentialTypes ?? ['authorization']).includes('authorization'))
    return 'no EIP-3009 authorization credential accepted';
  if (r.methodDetails.splits?.length) return 'split payments are not paid';
  const amount = BigInt(r.amount);
  if (amount === 0n) return 'amount must be positive';
  if (!CREDENTIAL_HEADERS.has((c.header ?? 'authorization').toLowerCase()))
    return `the credential header '${c.header}' is not Authorization or Payment-Authorization`;
  const expiresAt = c.expires === undefined ? undefined : Date.parse(c.expires);
  if (expiresAt !== undefined && !Number.isFinite(expiresAt)) return 'expires is not a date';
  return {
    challenge: c,
    network,
    asset: r.currency.toLowerCase(),
    amount,
    payTo: r.recipient.toLowerCase(),
    expiresAt,
  };
}

type KnownAsset = (typeof import('mppx/evm').assets.baseSepolia)['USDC'];
interface MppModules {
  Challenge: typeof import('mppx').Challenge;
  evm: typeof import('mppx/evm');
  /** mppx's registry of EIP-3009 tokens (address, network, EIP-712 name and version). */
  known: readonly KnownAsset[];
}
let loaded: MppModules | undefined;

/**
 * Loads mppx (a second of CPU at import, so on the first MPP 402 only: a gateway that never meets
 * one never pays for it). The readers below need it loaded.
 */
export async function loadMpp(): Promise<void> {
  if (loaded) return;
  const [root, evm] = await Promise.all([import('mppx'), import('mppx/evm')]);
  const known = Object.values(evm.assets).flatMap((group) =>
    typeof group === 'object' && group !== null
      ? Object.values(group as Record<string, unknown>).filter((a): a is KnownAsset => evm.assets.isAsset(a))
      : [],
  );
  loaded = { Challenge: root.Challenge, evm, known };
}

function mods(): MppModules {
  if (!loaded) throw new Error('mpp: loadMpp() has not run');
  return loaded;
}

/** The known assets the asset map allows for some currency: the only ones the gateway's mppx client may sign for. */
export function signableAssets(map: X402AssetMap): KnownAsset[] {
  return mods().known.filter((a) =>
    [...map.values()].flat().some((e) => e.network === a.network && e.asset === a.address.toLowerCase()),
  );
}

/**
 * The gateway's MPP terms policy, before any budget check or signature: an asset the map
 * (`CTL_X402_ASSETS`) allows for the session's currency, whose EIP-712 domain mppx knows; an
 * `expires` at most `maxTimeoutSeconds` ahead (it becomes the authorization's `validBefore`, so
 * it is how long a sent credential holds the budget). Of what is left, the cheapest. Throws
 * `asset_not_allowed` or `payment_terms_refused`.
 */
export function chooseCharge(
  terms: MppTerms,
  o: { currency: string; assets: X402AssetMap; maxTimeoutSeconds: number; now: number },
): MppCharge {
  const mapped = terms.charges.filter((c) => assetAllowed(o.assets, o.currency, c.network, c.asset));
  if (mapped.length === 0) {
    const offered = terms.charges.map((c) => `${c.asset} on ${c.network}`).join(', ');
    throw new CtlError(
      'asset_not_allowed',
      `the merchant asks for ${offered}; none of them pays a ${o.currency} budget (CTL_X402_ASSETS)`,
    );
  }
  const known = mapped.filter((c) =>
    mods().known.some((a) => a.network === c.network && a.address.toLowerCase() === c.asset),
  );
  if (known.length === 0)
    throw refuse(`the EIP-712 domain of ${mapped[0]!.asset} on ${mapped[0]!.network} is not known to mppx`);
  // No `expires` would let the client pick its own validity: refused, like one too long or past.
  const timely = known.filter(
    (c) => c.expiresAt !== undefined && c.expiresAt > o.now && c.expiresAt <= o.now + o.maxTimeoutSeconds * 1000,
  );
  if (timely.length === 0) {
    const c = known[0]!;
    throw refuse(
      c.expiresAt === undefined || c.expiresAt <= o.now
        ? 'the challenge has no expires, or it has passed'
        : `expires is ${Math.ceil((c.expiresAt - o.now) / 1000)} s ahead, above the gateway's ` +
            `${o.maxTimeoutSeconds} s: a signed authorization would stay cashable, and hold the budget, too long`,
    );
  }
  const sized = timely.filter((c) => c.amount <= MAX_AMOUNT);
  if (sized.length === 0) throw refuse('amount is too large');
  return sized.reduce((best, c) => (c.amount < best.amount ? c : best));
}
