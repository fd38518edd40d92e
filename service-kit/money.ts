/**
 * Amounts as a person reads them. The wire carries minor units (decimal strings, PROTOCOL.md §1);
 * a message shows the amount in its currency where the exponent is known — ISO 4217 for fiat
 * (`12.50 EUR`, `1250 JPY`), the token's decimals for the stablecoins the x402 rail pays in
 * (`0.010000 USDC`) — and says "minor units" where it is not (`1250 minor units of XYZ`), so that
 * no message prints a bare `1250 EUR` for 12.50 EUR. Display only: never parsed back.
 */

/** Decimals of the tokens the gateway's x402 rail pays in (their contracts' `decimals()`). */
const TOKEN_DECIMALS: Record<string, number> = { USDC: 6, EURC: 6, USDT: 6, PYUSD: 6 };

let iso4217: Set<string> | undefined;

/**
 * Decimal places of the currency's minor unit, or undefined when not known: ISO 4217 codes as
 * the runtime's Intl knows them, and the tokens above. An unknown three-letter code is not
 * guessed at (Intl would answer 2 for any well-formed code).
 * @example currencyExponent('EUR') // 2; currencyExponent('JPY') // 0; currencyExponent('XYZ') // undefined
 */
export function currencyExponent(currency: string): number | undefined {
  if (Object.hasOwn(TOKEN_DECIMALS, currency)) return TOKEN_DECIMALS[currency];
  if (!/^[A-Z]{3}$/.test(currency)) return undefined;
  iso4217 ??= new Set(Intl.supportedValuesOf('currency'));
  if (!iso4217.has(currency)) return undefined;
  return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits;
}

/**
 * @example formatMinor('1250', 'EUR') // '12.50 EUR'
 * @example formatMinor('1250', 'XYZ') // '1250 minor units of XYZ'
 * @example formatMinor(10000n, 'USDC') // '0.010000 USDC'
 */
export function formatMinor(minor: string | bigint, currency: string): string {
  const text = typeof minor === 'bigint' ? minor.toString() : minor;
  if (!/^-?[0-9]+$/.test(text)) return `${text} ${currency}`.trim();
  const digits = currencyExponent(currency);
  if (digits === undefined) return `${text} minor units of ${currency}`;
  const negative = text.startsWith('-');
  const abs = (negative ? text.slice(1) : text).replace(/^0+(?=\d)/, '');
  if (digits === 0) return `${negative ? '-' : ''}${abs} ${currency}`;
  const padded = abs.padStart(digits + 1, '0');
  return `${negative ? '-' : ''}${padded.slice(0, -digits)}.${padded.slice(-digits)} ${currency}`;
}
