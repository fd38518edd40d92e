/**
 * The configuration of a child session (POST /sessions/{id}/children): PROTOCOL.md §14's rules,
 * which only narrow. Every field is the parent's when absent; a field that would widen the
 * parent's is 400 `delegation_invalid` naming it; a malformed one is 400 `malformed`. The child
 * keeps the parent's `defaultPurpose` while its purposes allow it, or names its own. The child's
 * payments also count on every ancestor (payments/store/counters.ts), so narrowing here is what the
 * sub-agent is told, and the ancestors' counters are what bounds the money.
 */
import { CtlError, isPurpose, isPurposePattern, parseTimestamp, purposeAllowed } from '../../src/index.js';
import { badRequest } from '../../service-kit/http-error.js';
import type { SessionRecord, SessionWindow } from './store.js';
import { amountField, closed, globs, isObject, parseWindows, type SessionConfig } from './config.js';

const FIELDS = [
  'budget',
  'purposes',
  'expiresAt',
  'label',
  'merchantAllowlist',
  'merchantBlocklist',
  'velocity',
  'windows',
  'windowsStart',
  'defaultPurpose',
];

const widens = (field: string, why: string) => new CtlError('delegation_invalid', `${field}: ${why}`);

/** A child's purpose pattern is within the parent's: `d:k` by the parent's patterns, `d:*` only by `d:*`. */
function purposeWithin(p: string, parent: string[]): boolean {
  return p.endsWith(':*') ? parent.includes(p) : purposeAllowed(p, parent);
}

export interface ChildConfig {
  config: SessionConfig;
  ceiling: bigint;
  expiresAt: number;
  windowsStart: number | null;
}

/**
 * Parses and checks a child's body against its parent (PROTOCOL.md §14).
 * @example parseChildConfig(parent, { budget: { amount: '500' }, purposes: ['api:search'] }, Date.now())
 */
export function parseChildConfig(parent: SessionRecord, body: unknown, now: number): ChildConfig {
  if (!isObject(body)) throw badRequest('body: must be a JSON object');
  for (const k of Object.keys(body)) if (!FIELDS.includes(k)) throw badRequest(`${k}: unknown field`);
  const pc = parent.config;

  const budget = body.budget;
  if (!isObject(budget)) throw badRequest('budget: required, { amount, currency? }');
  closed(budget, 'budget', ['amount', 'currency']);
  const amount = amountField(budget.amount, 'budget.amount');
  if (BigInt(amount) > parent.ceiling) throw widens('budget.amount', `above the parent's ceiling of ${parent.ceiling}`);
  if (budget.currency !== undefined && budget.currency !== parent.currency)
    throw widens('budget.currency', `must be the parent's, ${parent.currency}`);

  let purposes = pc.purposes;
  if (body.purposes !== undefined) {
    const list = body.purposes;
    if (!Array.isArray(list) || list.length === 0 || list.length > 100)
      throw badRequest('purposes: a non-empty array of at most 100 "<domain>:<kind>"');
    list.forEach((p, i) => {
      if (!isPurposePattern(p)) throw badRequest(`purposes[${i}]: must be "<domain>:<kind>" or "<domain>:*"`);
      if (!purposeWithin(p, pc.purposes)) throw widens(`purposes[${i}]`, `'${p}' is not among the parent's purposes`);
    });
    if (new Set(list).size !== list.length) throw badRequest('purposes: duplicate entries');
    purposes = list as string[];
  }

  let expiresAt = parent.expiresAt;
  let expiresText = pc.expiresAt;
  if (body.expiresAt !== undefined) {
    try {
      expiresAt = parseTimestamp(body.expiresAt, 'expiresAt');
    } catch {
      throw badRequest('expiresAt: an RFC 3339 UTC timestamp such as "2030-01-01T00:00:00Z"');
    }
    if (expiresAt <= now) throw badRequest('expiresAt: must be in the future');
    if (expiresAt > parent.expiresAt) throw widens('expiresAt', `after the parent's expiry ${pc.expiresAt}`);
    expiresText = body.expiresAt as string;
  }

  let allow = pc.merchantAllowlist;
  if (body.merchantAllowlist !== undefined) {
    const list = globs(body.merchantAllowlist, 'merchantAllowlist');
    if (pc.merchantAllowlist.length) {
      const i = list.findIndex((g) => !pc.merchantAllowlist.includes(g));
      if (i >= 0) throw widens(`merchantAllowlist[${i}]`, `'${list[i]}' is not in the parent's allowlist`);
      if (list.length === 0) throw widens('merchantAllowlist', "must keep the parent's allowlist");
    }
    allow = list;
  }
  // The parent's blocks always hold below it; the child may add its own.
  const block = [...new Set([...pc.merchantBlocklist, ...globs(body.merchantBlocklist, 'merchantBlocklist')])];

  const config: SessionConfig = {
    budget: { amount, currency: parent.currency },
    purposes,
    expiresAt: expiresText,
    label: typeof body.label === 'string' ? body.label.slice(0, 200) : '',
    merchantAllowlist: allow,
    merchantBlocklist: block,
    thresholds: [],
    trustLevel: pc.trustLevel,
  };
  if (body.label !== undefined && (typeof body.label !== 'string' || body.label.length > 200))
    throw badRequest('label: a string of at most 200 characters');

  // A sub-agent behind the egress proxy sends no X-Ctl-Purpose: the parent's default holds while
  // the child's purposes allow it, unless the child names its own.
  if (body.defaultPurpose !== undefined) {
    const d = body.defaultPurpose;
    if (!isPurpose(d)) throw badRequest('defaultPurpose: must be a purpose "<domain>:<kind>", e.g. "api:search"');
    if (!purposeAllowed(d, purposes)) throw badRequest(`defaultPurpose: '${d}' is not among the child's purposes`);
    config.defaultPurpose = d;
  } else if (pc.defaultPurpose && purposeAllowed(pc.defaultPurpose, purposes))
    config.defaultPurpose = pc.defaultPurpose;

  const velocity = childVelocity(pc.velocity, body.velocity);
  if (velocity) config.velocity = velocity;

  const own = parseWindows(body, BigInt(amount));
  const windows = own.windows ?? pc.windows?.map((w) => narrowedWindow(w, BigInt(amount)));
  if (own.windows) checkWindowsNarrow(pc.windows ?? [], own.windows);
  let windowsStart: number | null = null;
  if (windows) {
    config.windows = windows;
    windowsStart = own.windowsStart ? Date.parse(own.windowsStart) : (parent.windowsStart ?? now);
  }
  if (own.windowsStart) config.windowsStart = own.windowsStart;
  return { config, ceiling: BigInt(amount), expiresAt, windowsStart };
}

/** A parent's window kept by a child, no larger than the child's own ceiling. */
function narrowedWindow(w: SessionWindow, ceiling: bigint): SessionWindow {
  return BigInt(w.maxAmountMinor) > ceiling ? { ...w, maxAmountMinor: ceiling.toString() } : { ...w };
}

/** Every window of the parent has one of the same period in the child, with no larger limits. */
function checkWindowsNarrow(parent: SessionWindow[], child: SessionWindow[]) {
  for (const pw of parent) {
    const i = child.findIndex((c) => c.every === pw.every);
    if (i < 0) throw widens('windows', `must keep the parent's ${pw.every} window`);
    const cw = child[i]!;
    if (BigInt(cw.maxAmountMinor) > BigInt(pw.maxAmountMinor))
      throw widens(`windows[${i}].maxAmountMinor`, `above the parent's ${pw.every} limit of ${pw.maxAmountMinor}`);
    if (pw.maxPayments !== undefined && (cw.maxPayments === undefined || cw.maxPayments > pw.maxPayments))
      throw widens(`windows[${i}].maxPayments`, `above the parent's ${pw.every} limit of ${pw.maxPayments} payments`);
  }
}

/** Velocity only narrows: each of the parent's limits is kept or lowered. */
function childVelocity(parent: SessionConfig['velocity'], v: unknown): SessionConfig['velocity'] | undefined {
  const out: NonNullable<SessionConfig['velocity']> = { ...parent };
  if (v !== undefined) {
    if (!isObject(v)) throw badRequest('velocity: must be { maxPaymentsPerHour?, maxAmountPerMerchantPerDay? }');
    closed(v, 'velocity', ['maxPaymentsPerHour', 'maxAmountPerMerchantPerDay']);
    if (v.maxPaymentsPerHour !== undefined) {
      const n = v.maxPaymentsPerHour;
      if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1)
        throw badRequest('velocity.maxPaymentsPerHour: must be an integer ≥ 1');
      if (parent?.maxPaymentsPerHour !== undefined && n > parent.maxPaymentsPerHour)
        throw widens('velocity.maxPaymentsPerHour', `above the parent's ${parent.maxPaymentsPerHour}`);
      out.maxPaymentsPerHour = n;
    }
    if (v.maxAmountPerMerchantPerDay !== undefined) {
      const a = amountField(v.maxAmountPerMerchantPerDay, 'velocity.maxAmountPerMerchantPerDay');
      const p = parent?.maxAmountPerMerchantPerDay;
      if (p !== undefined && BigInt(a) > BigInt(p))
        throw widens('velocity.maxAmountPerMerchantPerDay', `above the parent's ${p}`);
      out.maxAmountPerMerchantPerDay = a;
    }
  }
  return Object.keys(out).length ? out : undefined;
}

/**
 * `CTL_GATEWAY_MAX_SESSION_DEPTH` (1–16, default 4): how many levels of child sessions a root
 * session may have below it. Anything else stops the start with a message naming it.
 */
export function maxSessionDepthFromEnv(env: Record<string, string | undefined>): number | undefined {
  const v = env.CTL_GATEWAY_MAX_SESSION_DEPTH;
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 16) throw new Error('CTL_GATEWAY_MAX_SESSION_DEPTH: an integer 1–16');
  return n;
}
