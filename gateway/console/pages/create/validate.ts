/**
 * The create form checked before anything is sent, and turned into POST /sessions's body: amounts
 * typed in major units become minor-unit strings (PROTOCOL.md §1), every problem named by field.
 * The gateway checks it all again; this only saves a round trip and names the field.
 */
import { toMinor, currencyDigits } from '../../dom.js';
import { PERIODS } from './form.js';
import type { Problem } from './fields.js';

/** A field's trimmed text, by name. */
type Read = (name: string) => string;

/** What the form says, checked: minor units, lists and numbers, ready for the body. */
export interface Values {
  currency: string;
  amount: string | undefined;
  purposes: string[];
  hours: number;
  soft: string | undefined;
  perMerchant: string | undefined;
  perHourText: string;
  windows: Record<string, unknown>[];
  windowsStart: string;
  thresholds: number[];
}

const WHOLE = /^[1-9]\d{0,8}$/;

export const splitList = (t: string) =>
  t
    .split(/[\s,]+/)
    .map((x) => x.trim())
    .filter(Boolean);

/** Every problem, in the form's order (the first is focused), and the values read. */
export function checkForm(val: Read): { problems: Problem[]; values: Values } {
  const problems: Problem[] = [];
  const currency = val('currency').toUpperCase();
  if (!/^[A-Z0-9]{3,12}$/.test(currency)) problems.push(['currency', 'a code of 3–12 letters or digits, such as USD']);
  const money = moneyReader(val, currencyDigits(currency), problems);
  const amount = money('amount', true);
  const purposes = checkPurposes(splitList(val('purposes')), problems);
  const hours = Number(val('expiresIn'));
  if (!(hours > 0) || hours > 24 * 366) problems.push(['expiresIn', 'a number of hours greater than 0']);
  const soft = money('softLimit', false);
  const perMerchant = money('maxAmountPerMerchantPerDay', false);
  const perHourText = val('maxPaymentsPerHour');
  if (perHourText && !WHOLE.test(perHourText)) problems.push(['maxPaymentsPerHour', 'a whole number of at least 1']);
  const windows = checkWindows(val, money, amount, problems);
  const windowsStart = checkWindowsStart(val('windowsStart'), windows.length > 0, problems);
  const thresholds = splitList(val('thresholds')).map(Number);
  if (thresholds.some((t) => !Number.isInteger(t) || t < 1 || t > 100))
    problems.push(['thresholds', 'whole percentages from 1 to 100']);
  const values = {
    currency,
    amount,
    purposes,
    hours,
    soft,
    perMerchant,
    perHourText,
    windows,
    windowsStart,
    thresholds,
  };
  return { problems, values };
}

/** Reads an amount field as minor units: undefined when empty or wrong, the problem recorded. */
function moneyReader(val: Read, digits: number | undefined, problems: Problem[]) {
  return (name: string, required: boolean) => {
    const t = val(name);
    if (!t) {
      if (required) problems.push([name, 'required']);
      return undefined;
    }
    const m = toMinor(t, digits);
    if ('error' in m) problems.push([name, m.error]);
    else if (m.minor === '0') problems.push([name, 'must be more than zero']);
    else return m.minor;
    return undefined;
  };
}

function checkPurposes(purposes: string[], problems: Problem[]) {
  if (purposes.length === 0) problems.push(['purposes', 'at least one, such as api:search']);
  else
    for (const p of purposes)
      if (!/^[a-z0-9][a-z0-9._-]{0,62}:([a-z0-9][a-z0-9._-]{0,62}|\*)$/.test(p))
        problems.push(['purposes', `“${p}” is not <domain>:<kind> in lower case`]);
  return purposes;
}

/** The windows filled in, in period order; each at most the ceiling, at most four (PROTOCOL.md §13). */
function checkWindows(
  val: Read,
  money: (name: string, required: boolean) => string | undefined,
  amount: string | undefined,
  problems: Problem[],
) {
  const windows: Record<string, unknown>[] = [];
  for (const [every] of PERIODS) {
    const max = money(`window-${every}`, false);
    const count = val(`windowPayments-${every}`);
    if (count && !WHOLE.test(count)) problems.push([`windowPayments-${every}`, 'a whole number of at least 1']);
    else if (count && !max) problems.push([`window-${every}`, 'required with a number of payments']);
    if (max && amount && BigInt(max) > BigInt(amount)) problems.push([`window-${every}`, 'at most the ceiling']);
    if (max) windows.push({ every, maxAmountMinor: max, ...(count ? { maxPayments: Number(count) } : {}) });
  }
  if (windows.length > 4) problems.push([`window-${windows[4]!.every}`, 'at most four windows']);
  return windows;
}

function checkWindowsStart(windowsStart: string, anyWindow: boolean, problems: Problem[]) {
  if (windowsStart && !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/.test(windowsStart))
    problems.push(['windowsStart', 'a UTC time such as 2026-11-26T23:00:00Z']);
  else if (windowsStart && !anyWindow) problems.push(['windowsStart', 'only with a window']);
  return windowsStart;
}

/** POST /sessions's body from checked values: optional members only when given. */
export function sessionConfig(v: Values, val: Read): Record<string, unknown> {
  const expiresAt = new Date(Date.now() + v.hours * 3600_000).toISOString().replace(/\.\d+Z$/, 'Z');
  const config: Record<string, unknown> = {
    budget: { amount: v.amount, currency: v.currency },
    purposes: v.purposes,
    expiresAt,
  };
  if (val('label')) config.label = val('label');
  if (v.soft) config.softLimit = { amount: v.soft };
  const velocity: Record<string, unknown> = {};
  if (v.perHourText) velocity.maxPaymentsPerHour = Number(v.perHourText);
  if (v.perMerchant) velocity.maxAmountPerMerchantPerDay = v.perMerchant;
  if (Object.keys(velocity).length) config.velocity = velocity;
  const allow = splitList(val('merchantAllowlist'));
  const block = splitList(val('merchantBlocklist'));
  if (allow.length) config.merchantAllowlist = allow;
  if (block.length) config.merchantBlocklist = block;
  if (v.thresholds.length) config.thresholds = v.thresholds;
  if (v.windows.length) config.windows = v.windows;
  if (v.windowsStart) config.windowsStart = v.windowsStart;
  if (val('webhookUrl')) config.webhookUrl = val('webhookUrl');
  return config;
}
