/**
 * Validation of POST /sessions (spec §2.1 plus PROTOCOL.md §8 controls). The accepted
 * configuration, with defaults filled in, is the session's policy document: its policyHash goes
 * into the internal grant and every SBA (spec §2.3, PROTOCOL.md §2). Unknown fields are refused
 * so nothing the owner meant as a limit is silently ignored.
 */
import {
  isAmount,
  isCurrency,
  isPurposePattern,
  isPurpose,
  purposeAllowed,
  parseTimestamp,
  formatTimestamp,
  WINDOW_PERIODS,
} from '../../src/index.js';
import { badRequest } from '../../service-kit/http-error.js';
import { canonicalHost } from '../../service-kit/host-name.js';
import { optionalText } from '../../service-kit/text-field.js';
import { generateWebhookSecret } from '../../service-kit/webhook-signature.js';
import { MAX_AMOUNT } from '../../service-kit/amount.js';
import {
  canonicalGlob,
  firstInertGlob,
  globProgramSizes,
  hostGlobList,
  MAX_GLOB_PROGRAM,
  MAX_LIST_PROGRAM,
  MAX_RANGE,
} from '../net/host-glob.js';

export type { SessionConfig } from './store.js';
import type { SessionConfig, SessionWindow } from './store.js';

const PERIODS: readonly string[] = WINDOW_PERIODS;

/**
 * `windows` (PROTOCOL.md §13): 1–4 of `{ every, maxAmountMinor, maxPayments? }`, each period at
 * most once, none above the lifetime `ceiling`; `windowsStart` only beside them, a timestamp.
 * Throws 400 `malformed` naming the field.
 */
export function parseWindows(
  body: Record<string, unknown>,
  ceiling: bigint,
): { windows?: SessionWindow[]; windowsStart?: string } {
  if (body.windows === undefined) {
    if (body.windowsStart !== undefined) throw badRequest('windowsStart: only meaningful beside windows');
    return {};
  }
  const list = body.windows;
  if (!Array.isArray(list) || list.length < 1 || list.length > 4)
    throw badRequest('windows: must be 1–4 windows { every, maxAmountMinor, maxPayments? }');
  const seen = new Set<string>();
  const windows = list.map((w, i): SessionWindow => {
    const f = `windows[${i}]`;
    if (!isObject(w)) throw badRequest(`${f}: must be { every, maxAmountMinor, maxPayments? }`);
    closed(w, f, ['every', 'maxAmountMinor', 'maxPayments']);
    if (typeof w.every !== 'string' || !PERIODS.includes(w.every))
      throw badRequest(`${f}.every: one of ${PERIODS.join(', ')}`);
    if (seen.has(w.every)) throw badRequest(`${f}.every: ${w.every} is given twice`);
    seen.add(w.every);
    const max = amountField(w.maxAmountMinor, `${f}.maxAmountMinor`);
    if (BigInt(max) > ceiling) throw badRequest(`${f}.maxAmountMinor: above budget.amount`);
    const out: SessionWindow = { every: w.every as SessionWindow['every'], maxAmountMinor: max };
    if (w.maxPayments !== undefined) {
      const n = w.maxPayments;
      if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1 || n > 1_000_000_000)
        throw badRequest(`${f}.maxPayments: an integer 1–1000000000`);
      out.maxPayments = n;
    }
    return out;
  });
  if (body.windowsStart === undefined) return { windows };
  try {
    parseTimestamp(body.windowsStart, 'windowsStart');
  } catch {
    throw badRequest('windowsStart: an RFC 3339 UTC timestamp such as "2030-01-01T00:00:00Z"');
  }
  return { windows, windowsStart: body.windowsStart as string };
}

const FIELDS = new Set([
  'budget',
  'purposes',
  'expiresAt',
  'label',
  'merchantAllowlist',
  'merchantBlocklist',
  'velocity',
  'windows',
  'windowsStart',
  'softLimit',
  'webhookUrl',
  'thresholds',
  'trustLevel',
  'defaultPurpose',
]);

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export function closed(v: Record<string, unknown>, field: string, allowed: string[]) {
  for (const k of Object.keys(v)) if (!allowed.includes(k)) throw badRequest(`${field}.${k}: unknown field`);
}

export function amountField(v: unknown, field: string, positive = true): string {
  if (!isAmount(v)) throw badRequest(`${field}: must be a decimal string of minor units, e.g. "1500"`);
  const n = BigInt(v);
  if (positive && n === 0n) throw badRequest(`${field}: must be greater than zero`);
  if (n > MAX_AMOUNT) throw badRequest(`${field}: at most ${MAX_AMOUNT}`);
  return v;
}

export function globs(v: unknown, field: string): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.length > 100) throw badRequest(`${field}: must be an array of at most 100 host globs`);
  // Hosts are matched in canonical form (service-kit/host-name.ts), and so are the globs.
  const list = v.map((g, i) => {
    const c = typeof g === 'string' ? canonicalGlob(g) : undefined;
    if (c === undefined)
      throw badRequest(`${field}[${i}]: must be a host name, an address or a host glob such as "*.example.com"`);
    return c;
  });
  // A bracket or brace that is not syntax would be matched as text no host holds: such an entry
  // could never match, and in a blocklist would block nothing without a word. Refused instead.
  const inert = firstInertGlob(list);
  if (inert >= 0)
    throw badRequest(
      `${field}[${inert}]: "${list[inert]}" can match no host: a [ or { that is not glob ` +
        `syntax (left open, {x} without a comma, or a range over ${MAX_RANGE} values), or ` +
        'a [set] of no host character',
    );
  // Matching is linear in the host times the compiled size (net/host-glob.ts): bound the size.
  const sizes = globProgramSizes(list);
  sizes.forEach((n, i) => {
    if (n > MAX_GLOB_PROGRAM)
      throw badRequest(
        `${field}[${i}]: too many alternatives or ranges (compiles to ${n} states, at most ${MAX_GLOB_PROGRAM})`,
      );
  });
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total > MAX_LIST_PROGRAM)
    throw badRequest(`${field}: the globs together compile to ${total} states, at most ${MAX_LIST_PROGRAM}`);
  return list;
}

/**
 * Parses the body of POST /sessions; throws 400 `malformed` naming the field. `maxSessionSeconds`
 * bounds how far ahead `expiresAt` may be (a session's token and grant must not outlive what the
 * operator reviews; CTL_GATEWAY_MAX_SESSION_SECONDS).
 * @example parseSessionConfig({ budget: { amount: '1000', currency: 'USD' }, purposes: ['api:search'], expiresAt:
 * '2030-01-01T00:00:00Z' }, Date.now())
 */
export function parseSessionConfig(
  body: unknown,
  now: number,
  options: { maxSessionSeconds?: number } = {},
): SessionConfig {
  if (!isObject(body)) throw badRequest('body: must be a JSON object');
  for (const k of Object.keys(body)) if (!FIELDS.has(k)) throw badRequest(`${k}: unknown field`);

  const budget = body.budget;
  if (!isObject(budget)) throw badRequest('budget: required, { amount, currency }');
  closed(budget, 'budget', ['amount', 'currency']);
  const amount = amountField(budget.amount, 'budget.amount');
  if (!isCurrency(budget.currency)) throw badRequest('budget.currency: must be a currency or asset code such as "USD"');

  const purposes = body.purposes;
  if (!Array.isArray(purposes) || purposes.length === 0)
    throw badRequest('purposes: required, a non-empty array of "<domain>:<kind>"');
  if (purposes.length > 100) throw badRequest('purposes: at most 100');
  purposes.forEach((p, i) => {
    if (!isPurposePattern(p)) throw badRequest(`purposes[${i}]: must be "<domain>:<kind>" or "<domain>:*"`);
  });
  if (new Set(purposes).size !== purposes.length) throw badRequest('purposes: duplicate entries');

  let expires: number;
  try {
    expires = parseTimestamp(body.expiresAt, 'expiresAt');
  } catch {
    throw badRequest('expiresAt: required, an RFC 3339 UTC timestamp such as "2030-01-01T00:00:00Z"');
  }
  if (expires <= now) throw badRequest('expiresAt: must be in the future');
  const max = options.maxSessionSeconds;
  if (max !== undefined && expires > now + max * 1000) {
    throw badRequest(
      `expiresAt: at most ${max} s (${formatTimestamp(now + max * 1000)}) ahead; this gateway's ` +
        `longest session is CTL_GATEWAY_MAX_SESSION_SECONDS=${max}`,
    );
  }

  const label = optionalText(body, 'label', 200);

  const config: SessionConfig = {
    budget: { amount, currency: budget.currency as string },
    purposes: purposes as string[],
    expiresAt: body.expiresAt as string,
    label,
    merchantAllowlist: globs(body.merchantAllowlist, 'merchantAllowlist'),
    merchantBlocklist: globs(body.merchantBlocklist, 'merchantBlocklist'),
    thresholds: [],
    trustLevel: 0,
  };

  if (body.velocity !== undefined) {
    const v = body.velocity;
    if (!isObject(v)) throw badRequest('velocity: must be { maxPaymentsPerHour?, maxAmountPerMerchantPerDay? }');
    closed(v, 'velocity', ['maxPaymentsPerHour', 'maxAmountPerMerchantPerDay']);
    config.velocity = {};
    if (v.maxPaymentsPerHour !== undefined) {
      const n = v.maxPaymentsPerHour;
      if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1)
        throw badRequest('velocity.maxPaymentsPerHour: must be an integer ≥ 1');
      config.velocity.maxPaymentsPerHour = n;
    }
    if (v.maxAmountPerMerchantPerDay !== undefined) {
      config.velocity.maxAmountPerMerchantPerDay = amountField(
        v.maxAmountPerMerchantPerDay,
        'velocity.maxAmountPerMerchantPerDay',
      );
    }
  }
  Object.assign(config, parseWindows(body, BigInt(amount)));
  if (body.softLimit !== undefined) {
    const s = body.softLimit;
    if (!isObject(s)) throw badRequest('softLimit: must be { amount }');
    closed(s, 'softLimit', ['amount']);
    config.softLimit = { amount: amountField(s.amount, 'softLimit.amount') };
  }
  if (body.webhookUrl !== undefined) {
    const u = body.webhookUrl;
    let ok = false;
    try {
      // The URL parser drops tabs and newlines and encodes other controls: refuse them instead,
      // so the stored URL is the one called.
      ok =
        typeof u === 'string' &&
        u.length <= 2048 &&
        !/[\x00-\x20\x7f]/.test(u) &&
        ['http:', 'https:'].includes(new URL(u).protocol);
    } catch {}
    if (!ok) throw badRequest('webhookUrl: must be an http(s) URL');
    config.webhookUrl = u as string;
  }
  if (body.thresholds !== undefined) {
    const t = body.thresholds;
    if (!Array.isArray(t) || t.length > 10 || !t.every((x) => Number.isInteger(x) && x >= 1 && x <= 100)) {
      throw badRequest('thresholds: must be at most 10 integer percentages 1–100');
    }
    config.thresholds = [...new Set(t as number[])].sort((a, b) => a - b);
  }
  if (body.trustLevel !== undefined) {
    if (body.trustLevel !== 0 && body.trustLevel !== 1) throw badRequest('trustLevel: must be 0 or 1');
    config.trustLevel = body.trustLevel;
  }
  if (body.defaultPurpose !== undefined) {
    const d = body.defaultPurpose;
    if (!isPurpose(d)) throw badRequest('defaultPurpose: must be a purpose "<domain>:<kind>", e.g. "api:search"');
    if (!purposeAllowed(d, config.purposes))
      throw badRequest(`defaultPurpose: '${d}' is not allowed by the session's purposes`);
    config.defaultPurpose = d;
  }
  return config;
}

/** True when a concrete purpose is allowed by the session (PROTOCOL.md §1: `<domain>:*` allows a domain). */
export function purposeIsAllowed(purpose: string, allowed: string[]): boolean {
  return isPurpose(purpose) && purposeAllowed(purpose, allowed);
}

/**
 * The merchant check over the target host (PROTOCOL.md §8): the blocklist wins; a non-empty
 * allowlist admits only the hosts it matches. Globs are matched in linear time (net/host-glob.ts).
 */
export function createMerchantMatcher(
  config: Pick<SessionConfig, 'merchantAllowlist' | 'merchantBlocklist'>,
): (host: string) => boolean {
  const blocked = config.merchantBlocklist.length ? hostGlobList(config.merchantBlocklist) : () => false;
  const allowed = config.merchantAllowlist.length ? hostGlobList(config.merchantAllowlist) : () => true;
  return (host) => {
    // The canonical host (service-kit/host-name.ts): what limits, velocity and receipts name too.
    const h = canonicalHost(host);
    return h !== undefined && !blocked(h) && allowed(h);
  };
}

/** Longest a session may run (`expiresAt` at most this far ahead): 30 days. */
export const DEFAULT_MAX_SESSION_SECONDS = 30 * 86_400;

/** `CTL_GATEWAY_MAX_SESSION_SECONDS`: a positive integer (default 30 days). */
export function maxSessionSecondsFromEnv(env: Record<string, string | undefined>): number {
  const v = env.CTL_GATEWAY_MAX_SESSION_SECONDS?.trim();
  if (!v) return DEFAULT_MAX_SESSION_SECONDS;
  if (!/^[1-9][0-9]{0,9}$/.test(v))
    throw new RangeError(`CTL_GATEWAY_MAX_SESSION_SECONDS: a positive integer of seconds, got '${v.slice(0, 40)}'`);
  return Number(v);
}

/**
 * The columns a new session's row takes from its configuration: velocity limits, the webhook (its
 * signing secret made here, once) and thresholds. An owner's and a person's session alike.
 * @example insertOwnedSession(db, { ...row, ...configColumns(config) }, effect)
 */
export function configColumns(config: SessionConfig) {
  return {
    maxPerHour: config.velocity?.maxPaymentsPerHour ?? null,
    maxPerMerchantDay: config.velocity?.maxAmountPerMerchantPerDay
      ? BigInt(config.velocity.maxAmountPerMerchantPerDay)
      : null,
    webhookUrl: config.webhookUrl ?? null,
    webhookSecret: config.webhookUrl ? generateWebhookSecret() : null,
    thresholds: config.thresholds,
  };
}
