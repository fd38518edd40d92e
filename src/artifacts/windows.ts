/**
 * Budgets over time (PROTOCOL.md §13): so much per hour, day, week, month or year, beside a
 * lifetime ceiling. Windows are fixed, not rolling: window k of a period covers
 * [start + k·every, start + (k+1)·every), `start` being `windowsStart` (default: the artifact's
 * `issuedAt`). Months and years step in the calendar, in UTC, always from `start` (a start on the
 * 31st steps to the last day of a shorter month, and back to the 31st after it).
 */
import type { BudgetWindow } from './types.js';
import { arrayOf, amount, bad, counter, object, str, type Check, type Shape } from './schema.js';
import { formatTimestamp, parseTimestamp } from '../values.js';
import { fail } from '../errors.js';

/** The periods a window may have (ISO 8601 durations), shortest first. */
export const WINDOW_PERIODS = ['PT1H', 'P1D', 'P7D', 'P1M', 'P1Y'] as const;
export type WindowPeriod = (typeof WINDOW_PERIODS)[number];

const FIXED_MS: Partial<Record<WindowPeriod, number>> = { PT1H: 3_600_000, P1D: 86_400_000, P7D: 7 * 86_400_000 };
const MONTHS: Partial<Record<WindowPeriod, number>> = { P1M: 1, P1Y: 12 };

const windowShape: Shape = {
  every: [true, str(new RegExp(`^(${WINDOW_PERIODS.join('|')})$`), `one of ${WINDOW_PERIODS.join(', ')}`)],
  maxAmountMinor: [true, amount],
  maxPayments: [false, counter],
};

/** The `windows` member: 1–4 windows. */
export const windows: Check = arrayOf(object(windowShape), { min: 1, max: 4 });

/**
 * The rules of §13 a shape cannot say: each period at most once, no window above the artifact's
 * own `maxAmountMinor`, and `windowsStart` only beside `windows`. Throws `malformed`; a window above
 * the ceiling throws `aboveCeiling` (a delegation's: `delegation_invalid`, PROTOCOL.md §14).
 * @example checkWindowRules(grant, 'grant')
 */
export function checkWindowRules(
  value: Record<string, unknown>,
  field: string,
  aboveCeiling: 'malformed' | 'delegation_invalid' = 'malformed',
): void {
  const list = value['windows'] as BudgetWindow[] | undefined;
  if (list === undefined) {
    if (value['windowsStart'] !== undefined) bad(`${field}.windowsStart`, 'is only meaningful beside windows');
    return;
  }
  const ceiling = BigInt(value['maxAmountMinor'] as string);
  const seen = new Set<string>();
  list.forEach((w, i) => {
    if (seen.has(w.every)) bad(`${field}.windows[${i}].every`, `${w.every} is given twice`);
    seen.add(w.every);
    if (BigInt(w.maxAmountMinor) > ceiling) {
      const where = `${field}.windows[${i}].maxAmountMinor`;
      if (aboveCeiling === 'malformed') bad(where, `is above ${field}.maxAmountMinor`);
      fail(aboveCeiling, `${where}: a window above the link's own maxAmountMinor widens it`);
    }
  });
}

/** Where one window of a period stands. Ms since the epoch. */
export interface WindowSpan {
  /** k: how many periods after `start` (negative before it). */
  index: number;
  startsAt: number;
  /** When the next window starts: the reset time a refusal names. */
  endsAt: number;
}

/** `start` plus `months` calendar months, in UTC, the day clamped to the month's last. */
function addMonths(start: number, months: number): number {
  const d = new Date(start);
  const m = d.getUTCMonth() + months;
  const y = d.getUTCFullYear() + Math.floor(m / 12);
  const month = ((m % 12) + 12) % 12;
  const lastDay = new Date(Date.UTC(y, month + 1, 0)).getUTCDate();
  return Date.UTC(
    y,
    month,
    Math.min(d.getUTCDate(), lastDay),
    d.getUTCHours(),
    d.getUTCMinutes(),
    d.getUTCSeconds(),
    d.getUTCMilliseconds(),
  );
}

/**
 * The window of `every` that holds time `t`, counted from `start`.
 * @example windowAt('P1M', Date.parse('2026-01-31T00:00:00Z'), Date.parse('2026-02-28T12:00:00Z')).index // 1
 */
export function windowAt(every: WindowPeriod, startAt: number, at: number): WindowSpan {
  // Whole milliseconds, as Date holds them: a timestamp's sub-millisecond fraction moves no boundary.
  const start = Math.floor(startAt);
  const t = Math.floor(at);
  const fixed = FIXED_MS[every];
  if (fixed !== undefined) {
    const index = Math.floor((t - start) / fixed);
    return { index, startsAt: start + index * fixed, endsAt: start + (index + 1) * fixed };
  }
  const step = MONTHS[every]!;
  const d = new Date(start);
  const n = new Date(t);
  // An estimate from the calendar, then corrected by at most one step either way.
  let index = Math.floor(((n.getUTCFullYear() - d.getUTCFullYear()) * 12 + (n.getUTCMonth() - d.getUTCMonth())) / step);
  while (addMonths(start, index * step) > t) index--;
  while (addMonths(start, (index + 1) * step) <= t) index++;
  return { index, startsAt: addMonths(start, index * step), endsAt: addMonths(start, (index + 1) * step) };
}

/** The start the windows of an artifact count from: `windowsStart`, else its `issuedAt`. */
export function windowsStartOf(x: { issuedAt: string; windowsStart?: string }, field: string): number {
  return parseTimestamp(
    x.windowsStart ?? x.issuedAt,
    `${field}.${x.windowsStart === undefined ? 'issuedAt' : 'windowsStart'}`,
  );
}

/** A window's reset time as a timestamp (`resetsAt` of a `window_exceeded` refusal). */
export function resetsAt(span: WindowSpan): string {
  return formatTimestamp(span.endsAt);
}
