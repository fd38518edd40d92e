/**
 * A model-based test of a gateway session tree's counters (ARCHITECTURE.md rule 13), written from
 * PROTOCOL.md §7 and §13–§15 and the interface spec (§3 states, §8 limits), not from the gateway's
 * code. fast-check draws a root session (ceiling, soft limit, windows) and a sequence of commands —
 * payments, holds captured at what the merchant reports (X-Payment), x402 `upto` holds whose
 * merchant reports another amount than it settled, child sessions, revocations, continuations
 * of a paused root, clock moves across window ends and expiries — and runs them through the
 * gateway's HTTP API against dev merchants, and against the small model below.
 *
 * After every step: no session's spend passes its ceiling nor any window its limits; each
 * session's spend is the sum of the receipts of its subtree and equals the model's; the rail paid
 * each receipt once, what the receipt says (the ledger rows, the chain's transfers); every answer
 * is one the model allows (a payment the model says fits is paid; one it says does not is refused
 * with one of the codes the model names). Where the spec leaves a choice open (which code of
 * several failing limits; whether a child's payment over a paused or soft-limited root pauses it)
 * the model allows each and follows the gateway's choice.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { formatTimestamp } from '../../../src/index.js';
import { createEvmLedger, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { PERMIT2_ADDRESS } from '../../../gateway/dev/permit2.js';
import { startFacilitator, type Listening } from '../../../gateway/dev/x402-merchants.js';
import { startUptoMerchant } from '../../../gateway/dev/x402-upto-merchant.js';
import { startHostileFront, rewriteX402Settlement } from '../../../gateway/dev/hostile-merchants.js';
import { startTestGateway, call, type CallResult, type TestDb, type TestGateway } from '../helpers.js';
import { USDC_ASSETS } from '../x402/stand.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
type Every = 'PT1H' | 'P1D';
const EVERY_MS: Record<Every, number> = { PT1H: HOUR, P1D: DAY };
/** PROTOCOL.md §14, the gateway's default CTL_GATEWAY_MAX_SESSION_DEPTH. */
const MAX_DEPTH = 4;
/** The stock `upto` merchant's maximum ($0.05 of 6-decimal USDC) and its price per unit. */
const UPTO_MAX = 50_000n;
const UPTO_UNIT = 1_000n;
const PAYEE = '0x5555555555555555555555555555555555555555';
const CURRENCY = 'USDC';
const PURPOSE = 'api:search';

// ---------------------------------------------------------------------------------------------
// The stand: one gateway per engine, its merchants, and the clock the gateway reads.

export interface Stand {
  gw: TestGateway;
  clock: { t: number };
  ledger: EvmLedger;
  /** `/pay?amount=&addr=`: X-Payment `{ amount }`; `/hold?max=&capture=&status=&addr=`: `{ maxAmount }`. */
  xpay: string;
  /** A hostile front before the stock `upto` merchant: reports `?report=` whatever it settled. */
  upto: string;
  close(): Promise<void>;
}

/** An X-Payment merchant (spec §2.6) with holds (PROTOCOL.md §15): it reports what the URL says. */
async function startXPaymentMerchant(): Promise<Listening> {
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url!, 'http://x');
    const q = (k: string) => u.searchParams.get(k) ?? '';
    req.resume();
    if (u.pathname === '/pay') {
      if (typeof req.headers['x-payment-receipt'] === 'string') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end('{"paid":true}');
      }
      res.writeHead(402, {
        'x-payment': JSON.stringify({ amount: q('amount'), currency: CURRENCY, address: q('addr') }),
      });
      return res.end('{}');
    }
    if (typeof req.headers['x-payment-hold'] !== 'string') {
      res.writeHead(402, {
        'x-payment': JSON.stringify({ maxAmount: q('max'), currency: CURRENCY, address: q('addr') }),
      });
      return res.end('{}');
    }
    const capture = q('capture');
    res.writeHead(Number(q('status') || 200), {
      'content-type': 'application/json',
      ...(capture === '' ? {} : { 'x-payment-captured': capture }),
    });
    res.end('{"used":true}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  server.keepAliveTimeout = 1000;
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

export async function startStand(db: TestDb): Promise<Stand> {
  // The gateway's clock moves only when a command moves it, and starts a day ahead of the wall
  // clock: the x402 client signs validities from the wall clock, which the gateway refuses to
  // see later than its own clock allows (payments/schemes/x402/protocol.ts).
  const clock = { t: Math.floor(Date.now() / 1000) * 1000 + DAY };
  const ledger = createEvmLedger();
  const facilitator = await startFacilitator(ledger);
  const merchant = await startUptoMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  const front = await startHostileFront(merchant.url, {
    lie: (a, req) => {
      const report = new URL(req.path, 'http://x').searchParams.get('report');
      if (report === null || report === 'truth') return a;
      return rewriteX402Settlement((s) => {
        const { amount: _, ...rest } = s;
        return report === 'absent' ? rest : { ...s, amount: report };
      })(a);
    },
  });
  const xpay = await startXPaymentMerchant();
  const gw = await startTestGateway(db, {
    now: () => clock.t,
    maxSessionSeconds: 10 * 365 * 86400,
    rateLimits: {},
    x402: { assets: USDC_ASSETS, chain: () => ledger.reader as any },
  });
  ledger.mint(gw.gw.evmAddress, 10n ** 15n);
  ledger.approve(gw.gw.evmAddress, PERMIT2_ADDRESS, 10n ** 15n);
  return {
    gw,
    clock,
    ledger,
    xpay: xpay.url,
    upto: front.url,
    async close() {
      await gw.close();
      for (const l of [xpay, front, merchant, facilitator]) await l.close();
      await db.drop();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The model (PROTOCOL.md §13–§15, spec §3 and §8).

interface MWindow {
  every: Every;
  max: bigint;
  maxPayments?: number;
  /** Per window instance (its start): what is spent, how many payments, what a continuation added. */
  at: Map<number, { spent: bigint; payments: number; raised: bigint }>;
}

interface MSession {
  id: string;
  token: string;
  parent?: number;
  depth: number;
  /** The configured `budget.amount` (what a child may not exceed). */
  budget: bigint;
  /** The ceiling: the budget, raised by continuations. */
  ceiling: bigint;
  spent: bigint;
  windows: MWindow[];
  windowsStart: number;
  expiresAt: number;
  revoked: boolean;
  softLimit?: bigint;
  paused?: { every?: Every; resetsAt?: number };
  /** payment.settlement_mismatch events expected for this session. */
  mismatches: number;
}

export interface Model {
  t: number;
  sessions: MSession[];
  /** Commands that paid (each must have exactly one receipt). */
  paid: number;
}

interface Real {
  stand: Stand;
  /** The merchant address of this run's X-Payment payments (its ledger rows). */
  addr: string;
  payeeBefore: bigint;
}

function windowAt(m: Model, s: MSession, w: MWindow) {
  const ms = EVERY_MS[w.every];
  const start = s.windowsStart + Math.floor((m.t - s.windowsStart) / ms) * ms;
  let inst = w.at.get(start);
  if (!inst) w.at.set(start, (inst = { spent: 0n, payments: 0, raised: 0n }));
  return { start, end: start + ms, inst };
}

/** What a `window_exceeded` names when its window resets only after the session's end. */
const NO_RESET = 'none: the session ends first';

/** spec §3: a session is revoked, expired (at `expiresAt`), paused (until a window's reset), or active. */
function status(m: Model, s: MSession): 'revoked' | 'expired' | 'paused' | 'active' {
  if (s.revoked) return 'revoked';
  if (m.t >= s.expiresAt) return 'expired';
  if (s.paused && (s.paused.resetsAt === undefined || m.t < s.paused.resetsAt)) return 'paused';
  return 'active';
}

/**
 * The state a session's payments meet (PROTOCOL.md §14: a payment checks every ancestor): the
 * strongest of its chain's, revoked over expired over paused over active. What the views show.
 */
function chainStatus(m: Model, s: MSession): 'revoked' | 'expired' | 'paused' | 'active' {
  const rank = { active: 0, paused: 1, expired: 2, revoked: 3 } as const;
  return chain(m, s)
    .map((l) => status(m, l))
    .reduce((a, b) => (rank[b] > rank[a] ? b : a));
}

function chain(m: Model, s: MSession): MSession[] {
  const out = [s];
  while (out.at(-1)!.parent !== undefined) out.push(m.sessions[out.at(-1)!.parent!]!);
  return out;
}

/**
 * What may answer a reservation of `amount` by `s` (PROTOCOL.md §7, §13, §14): `ok` when every
 * counter of every link has room, else each code a failing limit names; `mayPause`: a soft limit
 * failed, so the session that has it may now be paused (spec §3 "budget exhausted" row).
 */
function reservation(
  m: Model,
  s: MSession,
  amount: bigint,
): { allowed: Set<string>; mayPause: boolean; resets: Set<string> } {
  const allowed = new Set<string>();
  /** The ends of the full windows: what a `window_exceeded` may name as `resetsAt` (§13). */
  const resets = new Set<string>();
  const links = chain(m, s);
  for (const [i, l] of links.entries()) {
    const st = status(m, l);
    // A revoked link revokes everything below it in the same change; an expired ancestor stops it too.
    if (st === 'revoked') allowed.add('session_revoked');
    if (st === 'expired') allowed.add('session_expired').add(i > 0 ? 'session_revoked' : 'session_expired');
  }
  if (allowed.size) return { allowed, mayPause: false, resets };
  if (status(m, s) === 'paused') {
    allowed.add('session_paused');
    // More than the whole ceiling is refused as such too: no state of the session would let it pass.
    if (amount > s.ceiling) allowed.add('budget_exceeded');
    return { allowed, mayPause: false, resets };
  }
  let mayPause = false;
  let room = true;
  const fail = (l: MSession, hard: string) => {
    room = false;
    if (l.softLimit === undefined) return allowed.add(hard);
    mayPause = true;
    allowed.add('session_paused');
    // The spec leaves open who pauses when a descendant's payment crosses an ancestor's soft limit,
    // and whether a payment larger than the whole ceiling (no continuation makes it fit) pauses.
    if (l !== s || amount > l.ceiling) allowed.add(hard);
  };
  for (const l of links) {
    if (l.spent + amount > l.ceiling) fail(l, 'budget_exceeded');
    for (const w of l.windows) {
      const { inst, end } = windowAt(m, l, w);
      const full = inst.spent + amount > w.max + inst.raised;
      if (full || (w.maxPayments !== undefined && inst.payments + 1 > w.maxPayments)) {
        fail(l, 'window_exceeded');
        // A window that resets only once the paying session has ended names no reset: the session
        // ends first, and a Retry-After past its end would send the agent back to nothing.
        resets.add(end >= s.expiresAt ? NO_RESET : formatTimestamp(end));
      }
    }
  }
  // A paused ancestor: spec §3 says a paused session refuses its own payments; of its children's
  // it says nothing, so either answer is allowed.
  if (links.slice(1).some((l) => status(m, l) === 'paused')) {
    allowed.add('session_paused');
    mayPause = true;
  }
  if (room) allowed.add('ok');
  return { allowed, mayPause, resets };
}

/** A payment of `spent` committed by `s`: on every link's lifetime total and current windows (§13, §14). */
function commitSpend(m: Model, s: MSession, spent: bigint) {
  for (const l of chain(m, s)) {
    l.spent += spent;
    for (const w of l.windows) {
      const { inst } = windowAt(m, l, w);
      inst.spent += spent;
      inst.payments += 1;
    }
  }
  m.paid += 1;
}

// ---------------------------------------------------------------------------------------------
// Talking to the gateway.

const owner = (r: Real) => r.stand.gw.ownerKey;

/** `paid` (a receipt), `passed` (the merchant's answer, nothing paid) or the gateway's refusal code. */
function outcomeOf(res: CallResult): string {
  const refused = res.headers.get('x-ctl-gateway-error');
  if (refused) return refused;
  if (res.headers.get('x-ctl-receipt-id')) return 'paid';
  return 'passed';
}

function proxyTo(r: Real, s: MSession, url: string) {
  return call(r.stand.gw.url, 'POST', '/proxy', {
    key: s.token,
    headers: { 'x-target-url': url, 'x-target-method': 'GET', 'x-ctl-purpose': PURPOSE },
  });
}

/** After a step whose soft limit may have paused a session: the gateway's choice, adopted. */
async function adoptPauses(m: Model, r: Real) {
  for (const s of m.sessions) {
    if (s.softLimit === undefined || status(m, s) !== 'active') continue;
    const v = (await call(r.stand.gw.url, 'GET', `/sessions/${s.id}`, { key: owner(r) })).body;
    if (v.state !== 'paused') continue;
    s.paused = v.pausedWindow ? { every: v.pausedWindow.every, resetsAt: Date.parse(v.pausedWindow.resetsAt) } : {};
    if (v.pausedWindow) {
      // §13: paused until the window's reset, the start of the next window.
      const w = s.windows.find((x) => x.every === v.pausedWindow.every);
      assert.ok(w, `${s.id} paused on a window it does not have: ${JSON.stringify(v.pausedWindow)}`);
      assert.is(v.pausedWindow.resetsAt, formatTimestamp(windowAt(m, s, w).end), `${s.id}: pausedWindow.resetsAt`);
    }
    count(v.pausedWindow ? `paused:${v.pausedWindow.every}` : 'paused:ceiling');
  }
}

/** One payment-like command: the gateway's answer checked against the model's, the model moved. */
async function attempt(
  m: Model,
  r: Real,
  s: MSession,
  reserve: bigint,
  url: string,
  /** What the answer is when the reservation succeeds, and what it spends. */
  then: { outcome: string; spent: bigint },
  label: string,
) {
  const { allowed, mayPause, resets } = reservation(m, s, reserve);
  const expected = new Set([...allowed].map((c) => (c === 'ok' ? then.outcome : c)));
  const res = await proxyTo(r, s, url);
  const got = outcomeOf(res);
  const what = `${label} by ${s.id}`;
  assert.ok(
    expected.has(got),
    `${what}: the gateway answered ${got}, the model allows ${[...expected].join(', ')} (${res.text})`,
  );
  if (got === 'window_exceeded') {
    const named = res.body.error.resetsAt ?? NO_RESET;
    assert.ok(resets.has(named), `${what}: resetsAt ${named}, not a full window's end`);
    if (named !== NO_RESET) assert.ok(Number(res.headers.get('retry-after')) > 0, `${what}: Retry-After`);
    else assert.is(res.headers.get('retry-after'), null, `${what}: a Retry-After past the session's end`);
  }
  count(`${label}:${got}`);
  if (got === 'paid') commitSpend(m, s, then.spent);
  if (mayPause) await adoptPauses(m, r);
  // Its own soft limit crossed: the session that answers session_paused is paused now (spec §3).
  if (got === 'session_paused' && s.softLimit !== undefined)
    assert.is(status(m, s), 'paused', `${what}: answered session_paused, the session is not paused`);
  return got;
}

/** What the runs exercised: answers by command (`pay:paid`, `hold:window_exceeded`, …), children, pauses. */
const stats = new Map<string, number>();
const count = (k: string) => stats.set(k, (stats.get(k) ?? 0) + 1);

// ---------------------------------------------------------------------------------------------
// Commands.

type Cmd = fc.AsyncCommand<Model, Real>;
const pick = (m: Model, i: number) => m.sessions[i % m.sessions.length]!;

/** An amount of `permille` thousandths of the root's budget (at least 1): sizes that fit, and some that do not. */
const share = (m: Model, permille: number) => (m.sessions[0]!.budget * BigInt(permille)) / 1000n || 1n;

class Pay implements Cmd {
  constructor(
    readonly i: number,
    readonly permille: number,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const s = pick(m, this.i);
    const amount = share(m, this.permille);
    const url = `${r.stand.xpay}/pay?amount=${amount}&addr=${r.addr}`;
    await attempt(m, r, s, amount, url, { outcome: 'paid', spent: amount }, 'pay');
  }
  toString = () => `pay(${this.i}, ${this.permille}‰)`;
}

type Capture = 'zero' | 'part' | 'full' | 'above' | 'absent';

/** An X-Payment hold (PROTOCOL.md §15) the merchant captures in its answer. */
class Hold implements Cmd {
  constructor(
    readonly i: number,
    readonly permille: number,
    readonly capture: Capture,
    readonly status: 200 | 500,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const s = pick(m, this.i);
    const max = share(m, this.permille);
    const c = { zero: 0n, part: (max + 1n) / 2n, full: max, above: max + 1n, absent: undefined }[this.capture];
    const ok = this.status === 200;
    // §15: above the hold pays nothing; without the header a 2xx captures the hold, anything else nothing.
    const spent = c ?? (ok ? max : 0n);
    const then =
      c !== undefined && c > max
        ? { outcome: 'capture_exceeds_hold', spent: 0n }
        : { outcome: spent > 0n ? 'paid' : 'passed', spent };
    const url =
      `${r.stand.xpay}/hold?max=${max}&status=${this.status}&addr=${r.addr}` + (c === undefined ? '' : `&capture=${c}`);
    await attempt(m, r, s, max, url, then, 'hold');
  }
  toString = () => `hold(${this.i}, ${this.permille}‰, ${this.capture}, ${this.status})`;
}

/** An x402 `upto` hold: the merchant settles `units`, and reports `report` (PROTOCOL.md §15, rule 13). */
class Upto implements Cmd {
  constructor(
    readonly i: number,
    readonly units: number,
    readonly report: 'truth' | 'absent' | 'low' | 'high',
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const s = pick(m, this.i);
    const settled = BigInt(this.units) * UPTO_UNIT;
    const report = { truth: 'truth', absent: 'absent', low: '1', high: UPTO_MAX.toString() }[this.report];
    const url = `${r.stand.upto}/metered?units=${this.units}&report=${report}`;
    const got = await attempt(m, r, s, UPTO_MAX, url, { outcome: 'paid', spent: settled }, 'upto');
    const says = { truth: settled, absent: UPTO_MAX, low: 1n, high: UPTO_MAX }[this.report];
    if (got === 'paid' && says !== settled) s.mismatches += 1;
  }
  toString = () => `upto(${this.i}, ${this.units}, ${this.report})`;
}

/** A child session (PROTOCOL.md §14) that only narrows its parent. */
class Child implements Cmd {
  constructor(
    readonly i: number,
    readonly share: number,
    readonly windowShare: number,
    readonly addHour: boolean,
    readonly expiry: 'parent' | 'hours' | 'minutes',
  ) {}
  check = (m: Readonly<Model>) => m.sessions.length < 7;
  async run(m: Model, r: Real) {
    // Every other child below the deepest session: trees reach the depth limit (PROTOCOL.md §14).
    const deepest = m.sessions.reduce((a, b) => (b.depth > a.depth ? b : a));
    const parent = this.i % 2 ? deepest : pick(m, this.i >> 1);
    if (chain(m, parent).some((l) => status(m, l) !== 'active')) return; // only an active chain delegates
    const budget = (parent.budget * BigInt(this.share)) / 100n || 1n;
    const cap = (v: bigint) => (v > budget ? budget : v < 1n ? 1n : v);
    const windows: MWindow[] = parent.windows.map((w) => ({
      every: w.every,
      max: cap((w.max * BigInt(this.windowShare)) / 100n),
      ...(w.maxPayments !== undefined ? { maxPayments: w.maxPayments } : {}),
      at: new Map(),
    }));
    if (this.addHour && !windows.some((w) => w.every === 'PT1H'))
      windows.push({ every: 'PT1H', max: cap(budget / 3n), at: new Map() });
    const expiresAt = Math.min(
      parent.expiresAt,
      { parent: parent.expiresAt, hours: m.t + 2 * HOUR, minutes: m.t + 30 * MINUTE }[this.expiry],
    );
    const res = await call(r.stand.gw.url, 'POST', `/sessions/${parent.id}/children`, {
      key: parent.token,
      body: {
        budget: { amount: budget.toString() },
        expiresAt: formatTimestamp(expiresAt),
        ...(windows.length
          ? {
              windows: windows.map((w) => ({
                every: w.every,
                maxAmountMinor: w.max.toString(),
                ...(w.maxPayments !== undefined ? { maxPayments: w.maxPayments } : {}),
              })),
              windowsStart: formatTimestamp(parent.windowsStart),
            }
          : {}),
      },
    });
    if (parent.depth + 1 > MAX_DEPTH) {
      assert.is(res.status, 400, `a child below depth ${MAX_DEPTH}: ${res.text}`);
      assert.is(res.body.error.code, 'delegation_invalid');
      count(`child:refused at depth ${parent.depth + 1}`);
      return;
    }
    assert.is(res.status, 201, `child of ${parent.id}: ${res.text}`);
    count(`child:depth ${parent.depth + 1}`);
    m.sessions.push({
      id: res.body.sessionId,
      token: res.body.sessionToken,
      parent: m.sessions.indexOf(parent),
      depth: parent.depth + 1,
      budget,
      ceiling: budget,
      spent: 0n,
      windows,
      windowsStart: parent.windowsStart,
      expiresAt,
      revoked: false,
      mismatches: 0,
    });
  }
  toString = () => `child(${this.i}, ${this.share}%, ${this.windowShare}%, ${this.addHour}, ${this.expiry})`;
}

/** The owner revokes a session: it and every session below it (spec §3, PROTOCOL.md §14). */
class Revoke implements Cmd {
  constructor(
    readonly i: number,
    readonly root: boolean,
  ) {}
  /** The root now and then; else a child (a revoked root leaves a run little to test). */
  check = (m: Readonly<Model>) => this.root || m.sessions.length > 1;
  async run(m: Model, r: Real) {
    const s = this.root ? m.sessions[0]! : m.sessions[1 + (this.i % (m.sessions.length - 1))]!;
    const res = await call(r.stand.gw.url, 'DELETE', `/sessions/${s.id}`, { key: owner(r) });
    assert.is(res.status, 200, res.text);
    const below = (x: MSession): boolean => x === s || (x.parent !== undefined && below(m.sessions[x.parent]!));
    // A session already past its expiresAt is over: it stays expired (spec §3: both end it).
    for (const x of m.sessions) if (below(x) && status(m, x) !== 'expired') x.revoked = true;
  }
  toString = () => `revoke(${this.root ? 'root' : this.i})`;
}

/** The owner continues a paused session: its ceiling, or the window that paused it, raised (spec §3). */
class Continue implements Cmd {
  constructor(
    readonly i: number,
    readonly share: number,
  ) {}
  check = (m: Readonly<Model>) => m.sessions.some((s) => status(m as Model, s) === 'paused');
  async run(m: Model, r: Real) {
    const paused = m.sessions.filter((s) => status(m, s) === 'paused');
    const s = paused[this.i % paused.length]!;
    const amount = (s.softLimit! * BigInt(this.share)) / 100n || 1n;
    const v = (await call(r.stand.gw.url, 'GET', `/sessions/${s.id}`, { key: owner(r) })).body;
    const res = await call(r.stand.gw.url, 'PATCH', `/sessions/${s.id}`, {
      key: owner(r),
      body: { continuationToken: v.continuationToken, amount: amount.toString() },
    });
    assert.is(res.status, 200, res.text);
    count(s.paused?.every ? 'continued:window' : 'continued:ceiling');
    if (s.paused?.every)
      windowAt(
        m,
        s,
        s.windows.find((w) => w.every === s.paused!.every)!,
      ).inst.raised += amount;
    else s.ceiling += amount;
    s.paused = undefined;
  }
  toString = () => `continue(${this.i}, ${this.share}%)`;
}

type Move = 'minute' | 'quarter' | 'hourEnd' | 'justBeforeHourEnd' | 'dayEnd' | 'dayAndHour';

/** The gateway's clock moves forward: to, just before, or past the ends of the windows. */
class Clock implements Cmd {
  constructor(readonly move: Move) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const start = m.sessions[0]!.windowsStart;
    const next = (ms: number) => start + (Math.floor((m.t - start) / ms) + 1) * ms;
    const to = {
      minute: m.t + MINUTE,
      quarter: m.t + 15 * MINUTE,
      hourEnd: next(HOUR),
      justBeforeHourEnd: next(HOUR) - 1000,
      dayEnd: next(DAY),
      dayAndHour: m.t + DAY + HOUR,
    }[this.move];
    m.t = Math.max(m.t + 1000, to);
    r.stand.clock.t = m.t;
  }
  toString = () => `clock(${this.move})`;
}

// ---------------------------------------------------------------------------------------------
// What holds after every step.

async function checkInvariants(m: Model, r: Real) {
  const { gw } = r.stand;
  const receipts = new Map<string, any[]>();
  for (const s of m.sessions) {
    const v = (await call(gw.url, 'GET', `/sessions/${s.id}`, { key: owner(r) })).body;
    const where = `session ${s.id} (depth ${s.depth})`;
    assert.is(v.state, chainStatus(m, s), `${where}: state`);
    assert.is(v.budget.amount, s.ceiling.toString(), `${where}: ceiling`);
    assert.is(v.reservedMinor, '0', `${where}: nothing stays reserved after a request`);
    assert.ok(BigInt(v.spentMinor) <= BigInt(v.budget.amount), `${where}: spent ${v.spentMinor} past its ceiling`);
    assert.is(v.spentMinor, s.spent.toString(), `${where}: spent`);
    assert.is((v.windows ?? []).length, s.windows.length, `${where}: windows`);
    for (const w of s.windows) {
      const seen = (v.windows as any[]).find((x) => x.every === w.every);
      const { start, inst } = windowAt(m, s, w);
      const at = `${where} window ${w.every} from ${formatTimestamp(start)}`;
      assert.is(seen?.startedAt, formatTimestamp(start), `${at}: start`);
      assert.ok(BigInt(seen.spentMinor) <= w.max + inst.raised, `${at}: spent ${seen.spentMinor} past its limit`);
      if (w.maxPayments !== undefined) assert.ok(seen.payments <= w.maxPayments, `${at}: payments past its limit`);
      assert.equal([seen.spentMinor, seen.payments], [inst.spent.toString(), inst.payments], `${at}: spent, payments`);
    }
    receipts.set(s.id, (await call(gw.url, 'GET', `/sessions/${s.id}/receipts`, { key: owner(r) })).body.receipts);
    const mismatches = gw.events.filter(
      (e) => e.type === 'payment.settlement_mismatch' && e.data.sessionId === s.id,
    ).length;
    assert.is(mismatches, s.mismatches, `${where}: settlement reports the chain contradicts`);
  }
  // Spent = the sum of the receipts of the subtree; each payment paid once, as its receipt says.
  const amount = (x: any) => BigInt(x.amount.amountMinor);
  const all = [...receipts.values()].flat();
  for (const s of m.sessions) {
    const below = (x: MSession): boolean => x === s || (x.parent !== undefined && below(m.sessions[x.parent]!));
    const sum = m.sessions
      .filter(below)
      .reduce((a, x) => a + receipts.get(x.id)!.reduce((b, y) => b + amount(y), 0n), 0n);
    assert.is(sum.toString(), s.spent.toString(), `session ${s.id}: spent is the sum of its subtree's receipts`);
  }
  assert.is(all.length, m.paid, 'one receipt per paid request');
  const ids = all.map((x) => x.sba.authorization.budgetId as string);
  assert.is(new Set(ids).size, ids.length, 'no payment has two receipts');
  const ledger = await gw.db.all<{ payment_id: string; amount: unknown }>(
    `SELECT payment_id, amount FROM gw_ledger WHERE address = ? AND status = 'paid'`,
    [r.addr],
  );
  const onLedger = new Map(ledger.map((x) => [x.payment_id, BigInt(String(x.amount))]));
  const ledgerReceipts = all.filter((x) => x.rail === 'ledger');
  assert.is(onLedger.size, ledgerReceipts.length, 'the ledger paid each X-Payment receipt, and nothing else');
  for (const x of ledgerReceipts)
    assert.is(
      onLedger.get(x.sba.authorization.budgetId),
      amount(x),
      `the ledger paid what receipt ${x.receiptId} says`,
    );
  const moved = r.stand.ledger.balanceOf(PAYEE) - r.payeeBefore;
  const uptoTotal = all.filter((x) => x.rail.startsWith('x402:')).reduce((a, x) => a + amount(x), 0n);
  assert.is(moved.toString(), uptoTotal.toString(), 'the chain moved what the x402 receipts say');
}

// ---------------------------------------------------------------------------------------------
// The property.

interface RootConfig {
  budget: bigint;
  softLimit?: bigint;
  windows: { every: Every; max: bigint; maxPayments?: number }[];
  /** How long before the session's creation its windows start (alignment). */
  windowsLead: number;
}

const rootConfig: fc.Arbitrary<RootConfig> = fc
  .record({
    budget: fc.bigInt({ min: 60_000n, max: 1_000_000n }),
    soft: fc.oneof(
      { arbitrary: fc.constant(undefined), weight: 2 },
      { arbitrary: fc.integer({ min: 1, max: 60 }), weight: 1 },
    ),
    hour: fc.option(
      fc.record({ share: fc.integer({ min: 5, max: 100 }), n: fc.option(fc.integer({ min: 1, max: 6 })) }),
    ),
    day: fc.option(
      fc.record({ share: fc.integer({ min: 10, max: 100 }), n: fc.option(fc.integer({ min: 2, max: 12 })) }),
    ),
    lead: fc.integer({ min: 0, max: 24 * 60 - 1 }),
  })
  .map(({ budget, soft, hour, day, lead }) => ({
    budget,
    ...(soft !== undefined ? { softLimit: (budget * BigInt(soft)) / 100n || 1n } : {}),
    windows: [
      ...(hour ? [{ every: 'PT1H' as const, share: hour.share, n: hour.n }] : []),
      ...(day ? [{ every: 'P1D' as const, share: day.share, n: day.n }] : []),
    ].map((w) => ({
      every: w.every,
      max: (budget * BigInt(w.share)) / 100n || 1n,
      ...(w.n !== null ? { maxPayments: w.n } : {}),
    })),
    windowsLead: lead * MINUTE,
  }));

const session = fc.nat({ max: 20 });
const permille = fc.oneof(fc.integer({ min: 1, max: 150 }), fc.integer({ min: 1, max: 1200 }));
const commands = [
  fc.tuple(session, permille).map(([i, a]) => new Pay(i, a)),
  fc
    .tuple(
      session,
      permille,
      fc.constantFrom<Capture>('zero', 'part', 'full', 'above', 'absent'),
      fc.constantFrom<200 | 500>(200, 500),
    )
    .map(([i, max, c, st]) => new Hold(i, max, c, st)),
  fc
    .tuple(
      session,
      fc.integer({ min: 1, max: 50 }),
      fc.constantFrom<'truth' | 'absent' | 'low' | 'high'>('truth', 'absent', 'low', 'high'),
    )
    .map(([i, u, rep]) => new Upto(i, u, rep)),
  fc
    .tuple(
      session,
      fc.integer({ min: 1, max: 100 }),
      fc.integer({ min: 1, max: 100 }),
      fc.boolean(),
      fc.constantFrom<'parent' | 'hours' | 'minutes'>('parent', 'hours', 'minutes'),
    )
    .map(([i, s, w, h, e]) => new Child(i, s, w, h, e)),
  fc.tuple(session, fc.integer({ min: 0, max: 3 })).map(([i, r]) => new Revoke(i, r === 0)),
  fc.tuple(session, fc.integer({ min: 1, max: 100 })).map(([i, s]) => new Continue(i, s)),
  fc
    .constantFrom<Move>('minute', 'quarter', 'hourEnd', 'justBeforeHourEnd', 'dayEnd', 'dayAndHour')
    .map((mv) => new Clock(mv)),
];

/** The commands, weighted: payments most, revocations least (a revoked root ends a run's interest). */
const weights = [6, 4, 2, 3, 1, 3, 4];
const weighted: fc.Arbitrary<Cmd>[] = commands.flatMap((c, i) => Array<fc.Arbitrary<Cmd>>(weights[i]!).fill(c));

async function setup(stand: Stand, cfg: RootConfig, run: number): Promise<{ model: Model; real: Real }> {
  const t = stand.clock.t;
  const windowsStart = t - cfg.windowsLead;
  const expiresAt = t + 20 * DAY;
  const res = await call(stand.gw.url, 'POST', '/sessions', {
    key: stand.gw.ownerKey,
    body: {
      budget: { amount: cfg.budget.toString(), currency: CURRENCY },
      purposes: [PURPOSE],
      expiresAt: formatTimestamp(expiresAt),
      label: `model run ${run}`,
      ...(cfg.softLimit !== undefined ? { softLimit: { amount: cfg.softLimit.toString() } } : {}),
      ...(cfg.windows.length
        ? {
            windows: cfg.windows.map((w) => ({
              every: w.every,
              maxAmountMinor: w.max.toString(),
              ...(w.maxPayments !== undefined ? { maxPayments: w.maxPayments } : {}),
            })),
            windowsStart: formatTimestamp(windowsStart),
          }
        : {}),
    },
  });
  assert.is(res.status, 201, res.text);
  const root: MSession = {
    id: res.body.sessionId,
    token: res.body.sessionToken,
    depth: 0,
    budget: cfg.budget,
    ceiling: cfg.budget,
    spent: 0n,
    windows: cfg.windows.map((w) => ({ ...w, at: new Map() })),
    windowsStart,
    expiresAt,
    revoked: false,
    ...(cfg.softLimit !== undefined ? { softLimit: cfg.softLimit } : {}),
    mismatches: 0,
  };
  return {
    model: { t, sessions: [root], paid: 0 },
    real: { stand, addr: `model-${run}-${res.body.sessionId}`, payeeBefore: stand.ledger.balanceOf(PAYEE) },
  };
}

/**
 * Runs the model against `stand`: `numRuns` session trees of at most `maxCommands` commands.
 * `CTL_MODEL_SEED` (and `CTL_MODEL_PATH`, both printed on failure) replay a failing run.
 */
export async function runSessionTreeModel(
  stand: Stand,
  o: { numRuns: number; maxCommands: number; label: string },
): Promise<{ runs: number; steps: number; seen: string }> {
  stats.clear();
  let runs = 0;
  let steps = 0;
  const seed = process.env.CTL_MODEL_SEED ? Number(process.env.CTL_MODEL_SEED) : undefined;
  const path = process.env.CTL_MODEL_PATH;
  const property = fc.asyncProperty(
    rootConfig,
    fc.commands(weighted, { maxCommands: o.maxCommands, size: 'max' }),
    async (cfg, cmds) => {
      runs++;
      await fc.asyncModelRun(
        () => setup(stand, cfg, runs),
        [...cmds].map((c) => {
          const wrapped: Cmd = {
            check: (m) => c.check(m),
            async run(m, r) {
              steps++;
              await c.run(m, r);
              await checkInvariants(m, r);
            },
            toString: () => c.toString(),
          };
          return wrapped;
        }),
      );
    },
  );
  const result = await fc.check(property, {
    numRuns: o.numRuns,
    ...(seed !== undefined ? { seed, ...(path ? { path } : {}) } : {}),
    // Shrinking re-runs whole trees against the gateway: on request only (CTL_MODEL_SHRINK=1).
    endOnFailure: process.env.CTL_MODEL_SHRINK !== '1',
  });
  if (result.failed) {
    console.log(
      `${o.label}: the model failed; replay with ` +
        `CTL_MODEL_SEED=${result.seed} CTL_MODEL_PATH=${result.counterexamplePath}\n` +
        `counterexample: ${fc.stringify(result.counterexample)}`,
    );
    throw result.errorInstance instanceof Error ? result.errorInstance : new Error(String(result.errorInstance));
  }
  const seen = [...stats].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${k} ${n}`);
  return { runs, steps, seen: seen.join(', ') };
}
