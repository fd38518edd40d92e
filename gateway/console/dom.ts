/**
 * DOM building without HTML strings: every text goes in as a text node, so nothing from the API
 * (a label, a merchant) can become markup. The CSP forbids inline script anyway; this keeps the
 * page from needing it.
 */
type Child = Node | string | number | false | null | undefined | Child[];
type Attrs = Record<string, string | number | boolean | EventListener | undefined | null>;

/** @example h('button', { type: 'button', onclick: go }, 'Open') */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K];
export function h(tag: string, attrs?: Attrs | null, ...children: Child[]): HTMLElement;
export function h(tag: string, attrs?: Attrs | null, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';
/** An SVG element (the chart). */
export function s(tag: string, attrs?: Attrs | null, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el: Element, attrs?: Attrs | null) {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

export function append(el: Node, children: Child[]) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

export function clear(el: Element, ...children: Child[]) {
  el.replaceChildren();
  append(el, children);
}

// ---- money: minor units (decimal strings) shown in major units, BigInt only (PROTOCOL.md §1)

/** Token assets whose minor unit is not an ISO 4217 exponent (PROTOCOL.md §1: USDC 10⁻⁶). */
const TOKEN_DIGITS: Record<string, number> = { USDC: 6, USDT: 6, EURC: 6, PYUSD: 6 };

/** Digits after the point for a currency, or undefined when unknown (amounts shown in minor units). */
export function currencyDigits(currency: string): number | undefined {
  if (currency in TOKEN_DIGITS) return TOKEN_DIGITS[currency];
  if (!/^[A-Z]{3}$/.test(currency)) return undefined;
  // Intl answers 2 for any well-formed code: only a code it knows has a known exponent.
  if (typeof Intl.supportedValuesOf === 'function' && !Intl.supportedValuesOf('currency').includes(currency))
    return undefined;
  try {
    return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits;
  } catch {
    return undefined;
  }
}

const group = (digits: string) => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/** @example formatMoney('123456', 'USD') // '1,234.56 USD' */
export function formatMoney(minor: string, currency: string): string {
  const d = currencyDigits(currency);
  if (!/^\d+$/.test(minor)) return `${minor} ${currency}`;
  if (d === undefined) return `${group(minor)} minor units of ${currency}`;
  if (d === 0) return `${group(minor)} ${currency}`;
  const padded = minor.padStart(d + 1, '0');
  return `${group(padded.slice(0, -d))}.${padded.slice(-d)} ${currency}`;
}

/**
 * What a session can still spend: nothing once it is revoked or expired, whatever the ceiling
 * minus the spend would say (the gateway refuses every further payment, PROTOCOL.md §9).
 * @example formatRemainingBudget('revoked', '700', 'USD') // 'none (revoked)'
 */
export function formatRemainingBudget(state: string, remainingMinor: string, currency: string): string {
  return state === 'revoked' || state === 'expired' ? `none (${state})` : formatMoney(remainingMinor, currency);
}

/**
 * A major-unit amount typed by a person ("12.5") as minor units ("1250"), or an error naming why.
 * @example toMinor('12.5', 2) // { minor: '1250' }
 */
export function toMinor(text: string, digits: number | undefined): { minor: string } | { error: string } {
  const t = text.trim().replace(/,/g, '');
  if (digits === undefined || digits === 0) {
    if (!/^\d+$/.test(t)) return { error: digits === undefined ? 'a whole number of minor units' : 'a whole number' };
    const minor = BigInt(t).toString();
    return { minor };
  }
  const m = /^(\d+)(?:\.(\d*))?$/.exec(t);
  if (!m) return { error: `a number such as 12.50` };
  const frac = m[2] ?? '';
  if (frac.length > digits) return { error: `at most ${digits} digits after the point` };
  return { minor: BigInt(m[1] + frac.padEnd(digits, '0')).toString() };
}

// ---- time

export function formatTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z')
    .replace(/Z$/, ' UTC');
}

/** "2h 05m" style remaining time; "" when past. */
export function formatRemaining(ms: number): string {
  if (ms <= 0) return '';
  const sec = Math.floor(ms / 1000);
  const d = Math.floor(sec / 86400);
  const hh = Math.floor((sec % 86400) / 3600);
  const mm = Math.floor((sec % 3600) / 60);
  const ss = sec % 60;
  const p = (n: number) => String(n).padStart(2, '0');
  if (d > 0) return `${d}d ${p(hh)}h`;
  if (hh > 0) return `${hh}h ${p(mm)}m`;
  return `${mm}m ${p(ss)}s`;
}
