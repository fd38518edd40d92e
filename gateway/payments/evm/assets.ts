/**
 * The x402 asset map: which on-chain assets, on which networks, the gateway may pay
 * with for a session budgeted in a given currency. `CTL_X402_ASSETS` is JSON such as
 * `{"USDC":[{"network":"eip155:84532","asset":"0x036C…"}]}`. A requirement outside the map is
 * `asset_not_allowed`: the session's budget is in minor units of its currency, and PROTOCOL.md §1
 * ties that unit to the token's atomic unit only for the assets named here.
 */
import { isCurrency } from '../../../src/index.js';

export interface X402Asset {
  /** CAIP-2, `eip155:<chain id>`. */
  network: string;
  /** The token contract, lower case 0x-hex. */
  asset: string;
}

/** Session currency → the assets that may pay it. */
export type X402AssetMap = ReadonlyMap<string, readonly X402Asset[]>;

export const CAIP2_EVM = /^eip155:[1-9][0-9]{0,18}$/;
export const EVM_ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/** Default of `CTL_X402_MAX_TIMEOUT_SECONDS`: how long a signed authorization may stay cashable. */
export const DEFAULT_MAX_TIMEOUT_SECONDS = 600;

/**
 * Default of `CTL_X402_MAX_HOLD_SECONDS`: how long one x402 payment may hold its amount of a
 * session's budget, from the signature to reconcile settling it (validity, the expiry margin and
 * reconcile's delay; holdCap below).
 */
export const DEFAULT_MAX_HOLD_SECONDS = 600;

/**
 * Parses `CTL_X402_ASSETS`. Throws an Error naming the bad entry: a gateway that cannot tell what
 * it may pay with must not start.
 * @example parseAssetMap('{"USDC":[{"network":"eip155:84532","asset":"0x036CbD53842c5426634e7929541eC2318f3dCF7e"}]}')
 */
export function parseAssetMap(json: string | undefined): X402AssetMap {
  const map = new Map<string, X402Asset[]>();
  if (json === undefined || json.trim() === '') return map;
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    throw new Error('CTL_X402_ASSETS: not JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new Error('CTL_X402_ASSETS: must be an object of currency → [{ network, asset }]');
  for (const [currency, list] of Object.entries(v as Record<string, unknown>)) {
    if (!isCurrency(currency)) throw new Error(`CTL_X402_ASSETS: '${currency}' is not a currency code`);
    if (!Array.isArray(list) || list.length === 0)
      throw new Error(`CTL_X402_ASSETS.${currency}: must be a non-empty array`);
    map.set(
      currency,
      list.map((e, i) => {
        const where = `CTL_X402_ASSETS.${currency}[${i}]`;
        if (typeof e !== 'object' || e === null) throw new Error(`${where}: must be { network, asset }`);
        const { network, asset, ...rest } = e as Record<string, unknown>;
        if (Object.keys(rest).length) throw new Error(`${where}: unknown field '${Object.keys(rest)[0]}'`);
        if (typeof network !== 'string' || !CAIP2_EVM.test(network))
          throw new Error(`${where}.network: must be CAIP-2 'eip155:<chain id>'`);
        if (typeof asset !== 'string' || !EVM_ADDRESS.test(asset))
          throw new Error(`${where}.asset: must be a 0x token address`);
        return { network, asset: asset.toLowerCase() };
      }),
    );
  }
  return map;
}

/**
 * The longest validity the gateway signs for (x402 and MPP). A sent authorization holds its
 * amount of the session's budget until reconcile settles it: up to its validity + `settleDelayMs`
 * (the expiry margin, then a reconcile pass once the row is stale). A merchant's terms may hold at
 * most `maxHoldSeconds` of a budget per request, so the validity is capped at that minus the
 * delay, and at `maxTimeoutSeconds`; terms above the cap are `payment_terms_refused`.
 * @example holdCap({ maxTimeoutSeconds: 600, maxHoldSeconds: 600, settleDelayMs: 210_000 }) // 390
 */
export function holdCap(o: { maxTimeoutSeconds: number; maxHoldSeconds?: number; settleDelayMs?: number }): number {
  const hold = o.maxHoldSeconds ?? DEFAULT_MAX_HOLD_SECONDS;
  // 0 when reconcile alone takes longer than the hold: every x402 402 is then refused.
  return Math.max(0, Math.min(o.maxTimeoutSeconds, Math.floor(hold - (o.settleDelayMs ?? 0) / 1000)));
}

/** Parses `CTL_X402_MAX_TIMEOUT_SECONDS` (default 600). */
export function parseMaxTimeoutSeconds(v: string | undefined): number {
  return seconds('CTL_X402_MAX_TIMEOUT_SECONDS', v, DEFAULT_MAX_TIMEOUT_SECONDS);
}

/** Parses `CTL_X402_MAX_HOLD_SECONDS` (default 600). */
export function parseMaxHoldSeconds(v: string | undefined): number {
  return seconds('CTL_X402_MAX_HOLD_SECONDS', v, DEFAULT_MAX_HOLD_SECONDS);
}

function seconds(name: string, v: string | undefined, fallback: number): number {
  if (v === undefined || v === '') return fallback;
  if (!/^[1-9][0-9]{0,6}$/.test(v)) throw new Error(`${name}: a positive whole number of seconds`);
  return Number(v);
}

/** Every network the map names (the networks the x402 client registers, nothing else). */
export function networksOf(map: X402AssetMap): string[] {
  return [...new Set([...map.values()].flat().map((a) => a.network))];
}

/** Is (network, asset) allowed for a session in `currency`? */
export function assetAllowed(map: X402AssetMap, currency: string, network: string, asset: string): boolean {
  const a = asset.toLowerCase();
  return (map.get(currency) ?? []).some((e) => e.network === network && e.asset === a);
}
