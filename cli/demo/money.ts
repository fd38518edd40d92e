/**
 * Amounts as the demo prints them: always decimals with the currency (`3.00 USD`,
 * `0.010000 USDC`), never minor units, so no line mixes the two. The wire keeps minor units
 * (decimal strings, PROTOCOL.md §1); this is display only.
 */

/** Decimal places of the minor unit: ISO 4217 for fiat, the token's decimals for USDC. */
const DECIMALS: Record<string, number> = { USD: 2, EUR: 2, GBP: 2, JPY: 0, USDC: 6 };

/** @example formatMinor('300', 'USD') === '3.00 USD'; formatMinor(10000n, 'USDC') === '0.010000 USDC' */
export function formatMinor(minor: string | bigint, currency: string): string {
  const digits = DECIMALS[currency] ?? 2;
  const value = BigInt(minor);
  const sign = value < 0n ? '-' : '';
  const text = (value < 0n ? -value : value).toString().padStart(digits + 1, '0');
  return `${sign}${digits ? `${text.slice(0, -digits)}.${text.slice(-digits)}` : text} ${currency}`;
}
