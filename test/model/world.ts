/**
 * One sequence's world for the model-based test (spend-harness.ts): the model (spend-model.ts)
 * and the SDK side by side. The SDK is driven through its built public entries only: `ctl` for
 * the wallets (createSession, delegate, capture) and for signing, and `ctl`, `ctl/verify`,
 * `ctl/edge` as three terminals of one merchant sharing one SpendStorage and one time floor.
 *
 * Each step runs on both, records what the SDK accepted into the model's ledgers (so the bounds
 * are counted over what really happened), checks the bounds and then the answer.
 */
import { SpendModel, type Entry, type Every, type Link, type Verdict, type WindowRule } from './spend-model.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createMemoryByteStorage } from '../../firmware-bridge/abi.js';

type Ctl = typeof import('ctl');
type CtlVerify = typeof import('ctl/verify');
type CtlEdge = typeof import('ctl/edge');
type Storage = import('ctl').SpendStorage;
type Session = import('ctl').WalletSession<any>;
type KeyPair = import('ctl').GeneratedKeyPair;
type Build = 'ctl' | 'verify' | 'edge';

export interface Config {
  grantMax: number;
  /** Each window: its period, its share of the grant (‰) and maybe a payment count. */
  windows: { every: Every; permille: number; maxPayments?: number }[];
  windowsStart: number;
  maxDepth: number;
  sbaTtlMin: number;
  /** The merchant's ledger is the root holder's wallet storage (a wallet and a verifier on one store). */
  /** Delegation ids drawn from a small set, so that cousins share one (never an ancestor's). */
  fewIds: boolean;
}
export type StorageKind = 'memory' | 'flash';

export const T0 = Date.UTC(2026, 0, 31, 10, 0, 0);
export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
export const GRANT_END = T0 + 400 * DAY;
export const WINDOWS_STARTS = [
  T0,
  T0 - 37 * MINUTE,
  Date.UTC(2026, 0, 31),
  Date.UTC(2026, 0, 1),
  Date.UTC(2025, 11, 30, 23, 0),
  Date.UTC(2024, 1, 29, 12, 0),
];
const ISSUER = 'authority.model.test';
/** CTL_MODEL_EXCLUDE (spend-harness.ts); read here: `captureFloor`, `walletTime`, `holdReuse`. */
/**
 * Draws the suite leaves out until they are settled, each an open finding (test/model/README.md);
 * `CTL_MODEL_ALL=1` draws them too:
 * - `fewIds`: ids drawn from a few, so siblings share a `delegationId`: the SDK keys link counters
 *   by the path of ids, so siblings with one id share a ceiling (§14 forbids only an ancestor's id);
 */
export const OPEN_FINDINGS = ['fewIds'];
export const EXCLUDED = new Set([
  ...(process.env['CTL_MODEL_EXCLUDE'] ?? '').split(',').filter(Boolean),
  ...(process.env['CTL_MODEL_ALL'] === '1' ? [] : OPEN_FINDINGS),
]);

const MAX_LINKS = 7;

// ---------------------------------------------------------------------------------------------
// Process-wide: built module instances (a restart takes the next one) and keys.

/** Instances of a built entry per "process": a restart moves to a module never used by this sequence. */
export const PROCESSES = 4;
const loaded = new Map<string, Promise<unknown>>();
function load<T>(specifier: 'ctl' | 'ctl/verify' | 'ctl/edge', i: number): Promise<T> {
  const url = import.meta.resolve(specifier);
  const key = `${url}#${i}`;
  if (!loaded.has(key)) loaded.set(key, import(i === 0 ? url : `${url}?process=${i}`));
  return loaded.get(key) as Promise<T>;
}

const ctl0 = await load<Ctl>('ctl', 0);
const authority = await ctl0.generateKeyPair({ alg: 'EdDSA' });
const authorityKid = await ctl0.jwkThumbprint(authority.publicJwk);
const root = await ctl0.generateKeyPair({ alg: 'EdDSA' });
/** Holder keys: the root grant's actor first, then one per delegation (distinct along any chain). */
const holderKeys: KeyPair[] = [];
for (let i = 0; i < MAX_LINKS; i++) holderKeys.push(await ctl0.generateKeyPair({ alg: 'EdDSA' }));
type SigningKey = import('ctl').SigningKey;
/** Private keys imported once per process (a restart imports them again, in its own module). */
const signersOf = new Map<Ctl, Promise<SigningKey[]>>();
function signers(c: Ctl): Promise<SigningKey[]> {
  if (!signersOf.has(c)) signersOf.set(c, Promise.all(holderKeys.map((k) => c.importSigningKey(k.privateKeyPem))));
  return signersOf.get(c)!;
}
const authoritySigner = await ctl0.importSigningKey(authority.privateKeyPem);
const rootSigner = await ctl0.importSigningKey(root.privateKeyPem);
/** Bundle sequences only grow, across sequences too. */
let bundleSequence = 0;
let worlds = 0;

export const counters = { sequences: 0, steps: 0, outcomes: new Map<string, number>() };
const bump = (k: string) => counters.outcomes.set(k, (counters.outcomes.get(k) ?? 0) + 1);

const iso = (t: number) => new Date(t).toISOString().replace('.000Z', 'Z');

// ---------------------------------------------------------------------------------------------

/** One SBA of the sequence, as the model sees it, with the SDK's object beside it. */
export interface SbaRec {
  sba: any;
  leaf: string;
  budgetId: string;
  max: bigint;
  issuedAt: number;
  expiresAt: number;
  hold: boolean;
  fromWallet: boolean;
  walletEntry?: Entry;
  merchantEntry?: Entry;
  /** Times a merchant terminal accepted it. */
  accepts: number;
  /** What the merchant captured (a receipt the wallet may learn). */
  captured?: bigint;
  /** The terminal that accepted it. */
  acceptedOn?: Build;
  /** The hold's name in the merchant's storage, when the verifier gives one (`holdId`). */
  holdId?: string;
}

type Outcome = { ok: true } | { ok: false; code: string; message: string; resetsAt?: string };

export class Disagreement extends Error {}

export class World {
  readonly m: SpendModel;
  readonly sbas: SbaRec[] = [];
  readonly linkKeys: string[] = [];
  readonly artifacts = new Map<string, any>();
  readonly storages = new Map<string, Storage>();
  readonly trace: string[] = [];
  readonly revokedIds: string[] = [];
  bundle: any;
  merchantStorage!: Storage;
  timeFloor: import('ctl').TimeFloor;
  walletProcess = 0;
  merchantProcess = 0;
  ctlWallet!: Ctl;
  walletSigners!: SigningKey[];
  builds!: { ctl: Ctl; verify: CtlVerify; edge: CtlEdge };
  sessions = new Map<string, Session>();
  private nextId = 0;

  constructor(
    readonly config: Config,
    readonly storageKind: StorageKind,
    readonly grantId: string,
    rootLink: Link,
  ) {
    this.m = new SpendModel(rootLink, T0);
    this.timeFloor = ctl0.createMemoryTimeFloor();
  }

  newStorage(): Storage {
    return this.storageKind === 'memory'
      ? ctl0.createMemorySpendStorage()
      : createKvSpendStorage(createMemoryByteStorage());
  }

  canRestart(who: 'wallet' | 'merchant' | 'both'): boolean {
    const w = this.walletProcess + 1 < PROCESSES;
    const m = this.merchantProcess + 1 < PROCESSES;
    return who === 'wallet' ? w : who === 'merchant' ? m : w && m;
  }

  async useProcesses(): Promise<void> {
    this.ctlWallet = await load<Ctl>('ctl', this.walletProcess);
    this.walletSigners = await signers(this.ctlWallet);
    this.builds = {
      ctl: await load<Ctl>('ctl', this.merchantProcess),
      verify: await load<CtlVerify>('ctl/verify', this.merchantProcess),
      edge: await load<CtlEdge>('ctl/edge', this.merchantProcess),
    };
  }

  async newBundle(): Promise<void> {
    this.bundle = await ctl0.createTrustBundle(
      {
        sequence: ++bundleSequence,
        scope: { category: 'model' },
        issuers: [
          {
            issuer: ISSUER,
            keys: [{ ...authority.publicJwk, kid: authorityKid, alg: 'EdDSA', purposes: ['grant'] }],
          },
        ],
        revokedGrants: [...this.revokedIds],
        issuedAt: iso(T0),
        expiresAt: iso(GRANT_END + DAY),
      },
      { signingKey: rootSigner, issuer: 'root.model.test' },
    );
  }

  /** The private key of a link's holder, as the wallet process imported it. */
  signerOf(key: string): SigningKey {
    return this.walletSigners[this.linkKeys.indexOf(key)]!;
  }

  /** The holder's wallet session on `key` in the current wallet process (new objects after a restart). */
  session(key: string): Session {
    let s = this.sessions.get(key);
    if (!s) {
      s = this.ctlWallet.createSession(this.artifacts.get(key), {
        actorId: `holder-${key}`,
        signingKey: this.signerOf(key),
        spendStorage: this.storages.get(key)!,
        now: () => this.m.clock,
        sbaTtlMs: this.config.sbaTtlMin * MINUTE,
        revocationFromBundles: { trustBundles: () => [this.bundle], rootPublicKeyPem: root.publicKeyPem },
      });
      this.sessions.set(key, s);
    }
    return s;
  }

  freshId(prefix: string): string {
    return `${prefix}${this.nextId++}`;
  }

  log(line: string): void {
    this.trace.push(`[${iso(this.m.clock)}] ${line}`);
  }

  /** After every step: no bound passed (counted over what the SDK accepted), no SBA accepted twice. */
  checkBounds(step: string): void {
    const links = [...this.m.links.values()];
    const merchantNow = Math.max(this.m.clock, this.m.floor);
    const atMerchant = SpendModel.boundsViolated(this.m.merchant, links, merchantNow);
    if (atMerchant) this.fail(`MONEY ${step}: the merchant's accepted payments pass a bound: ${atMerchant}`);
    for (const [holder, ledger] of this.m.wallets) {
      const v = SpendModel.boundsViolated(ledger, links, this.m.clock);
      if (v) this.fail(`MONEY ${step}: the wallet of ${holder} signed past a bound: ${v}`);
    }
    for (const s of this.sbas)
      if (s.accepts > 1) this.fail(`MONEY ${step}: SBA ${s.budgetId} was accepted ${s.accepts} times`);
  }

  /** The SDK's answer against the model's (PROTOCOL.md §9, §16 codes; §13 resetsAt). */
  compare(step: string, verdict: Verdict, out: Outcome): void {
    bump(`${step.split(' ')[0]}: ${out.ok ? 'ok' : out.code}`);
    if (verdict.ok) {
      if (out.ok) return;
      if (verdict.tolerate?.includes(out.code)) {
        bump(`tolerated: ${out.code}`);
        return;
      }
      this.fail(`${step}: the SDK refused (${out.code}: ${out.message}); the model accepts`);
    }
    if (out.ok) this.fail(`${step}: the SDK accepted; the model refuses (${verdict.codes.join(' | ')})`);
    if (!verdict.codes.includes(out.code))
      this.fail(
        `${step}: the SDK refused with ${out.code} (${out.message}); the model's code: ${verdict.codes.join(' | ')}`,
      );
    if (out.code === 'window_exceeded') {
      const at = out.resetsAt === undefined ? NaN : Date.parse(out.resetsAt);
      if (!verdict.resetsAt?.includes(at))
        this.fail(
          `${step}: window_exceeded with resetsAt ${out.resetsAt}; the model's: ` +
            (verdict.resetsAt ?? []).map(iso).join(' | '),
        );
    }
  }

  /**
   * The time floor the merchant's store holds after a call: within what §12 allows (every reading
   * it must keep, nothing above the clock readings it saw); the model then reads time against it.
   */
  async syncFloor(step: string): Promise<void> {
    const f = await this.timeFloor.get();
    if (f < this.m.floorRequired)
      this.fail(`${step}: the time floor ${iso(f)} lost a reading it must keep, ${iso(this.m.floorRequired)} (§12)`);
    if (f > this.m.clockSeen) this.fail(`${step}: the time floor ${iso(f)} is past every clock reading (§12)`);
    this.m.floor = f;
  }

  fail(message: string): never {
    this.log(`FAIL ${message}`);
    throw new Disagreement(message);
  }

  moveClock(to: number, kind: string): void {
    const t = Math.min(Math.max(to, T0), GRANT_END + 2 * HOUR);
    this.log(`clock ${kind} → ${iso(t)}`);
    this.m.clock = t;
    counters.steps++;
  }
}

export async function createWorld(config: Config, storageKind: StorageKind): Promise<World> {
  counters.sequences++;
  const grantId = `g${++worlds}-${Math.random().toString(36).slice(2, 8)}`;
  const max = BigInt(config.grantMax);
  const windows = config.windows.map((w) => ({
    every: w.every,
    max: (max * BigInt(w.permille)) / 1000n,
    ...(w.maxPayments !== undefined ? { maxPayments: w.maxPayments } : {}),
  }));
  const rootLink: Link = {
    key: 'G',
    id: grantId,
    max,
    issuedAt: T0,
    expiresAt: GRANT_END,
    windows,
    windowsStart: windows.length ? config.windowsStart : T0,
    revoked: false,
    depth: 0,
  };
  const w = new World(config, storageKind, grantId, rootLink);
  w.m.walletLedgerClock = !EXCLUDED.has('walletTime');
  await w.useProcesses();
  const grant = await ctl0.createSignedPolicyGrant(
    {
      grantId,
      policyHash: ctl0.policyHash({ model: grantId }),
      issuedAt: iso(T0),
      expiresAt: iso(GRANT_END),
      allowedRails: ['x402'],
      allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
      maxAmountMinor: String(max),
      currency: 'USD',
      actorKey: holderKeys[0]!.publicJwk,
      delegation: { maxDepth: config.maxDepth },
      ...(windows.length
        ? {
            windows: windows.map((x) => ({
              every: x.every,
              maxAmountMinor: String(x.max),
              ...(x.maxPayments !== undefined ? { maxPayments: x.maxPayments } : {}),
            })),
            windowsStart: iso(config.windowsStart),
          }
        : {}),
    },
    { issuer: ISSUER, keyId: authorityKid, signingKey: authoritySigner, revocationBaseUrl: 'https://a.test' },
  );
  w.linkKeys.push('G');
  w.artifacts.set('G', grant);
  w.storages.set('G', w.newStorage());
  // The merchant's storage is its own: a SpendStorage serves one role (ledgers.ts claimStorage).
  w.merchantStorage = w.newStorage();
  await w.newBundle();
  w.log(
    `grant ${grantId}: ${max} USD, windows ${windows.map((x) => `${x.every}:${x.max}/${x.maxPayments ?? '-'}`)}` +
      ` from ${iso(rootLink.windowsStart)}, maxDepth ${config.maxDepth}, SBA ttl ${config.sbaTtlMin} min, ` +
      `${storageKind} storage`,
  );
  return w;
}

function refusal(e: unknown): Outcome {
  const x = e as { code?: unknown; message?: string; name?: string; resetsAt?: string };
  if (typeof x?.code === 'string')
    return { ok: false, code: x.code, message: String(x.message), ...(x.resetsAt ? { resetsAt: x.resetsAt } : {}) };
  return { ok: false, code: `${x?.name ?? 'thrown'}`, message: String(x?.message ?? e) };
}

/**
 * Which SBA a terminal is shown: mostly one still alive that no terminal took yet (what a merchant
 * sees next), one time in five one it accepted and still alive (a replay), one in five any (an
 * expired one tests the expiry and nothing else).
 */
function pickSba(w: World, pick: number): number {
  const k = Math.floor(pick / 5);
  const live = w.sbas.flatMap((s, i) => (s.expiresAt > w.m.clock ? [i] : []));
  const fresh = live.filter((i) => w.sbas[i]!.accepts === 0);
  const again = live.filter((i) => w.sbas[i]!.accepts > 0);
  const from = [again, fresh, fresh, fresh, []][pick % 5]!;
  const or = from.length ? from : live.length && pick % 5 !== 4 ? live : undefined;
  return or ? or[k % or.length]! : k % w.sbas.length;
}

/** A hold authorises a maximum (a charger, an API bill): four times the share, at most the whole link. */
const holdShare = (permille: number, hold: boolean) => (hold ? Math.min(1000, permille * 4) : permille);

const share = (of: bigint, permille: number) => {
  const a = (of * BigInt(permille)) / 1000n;
  return a > 0n ? a : 1n;
};
const linkName = (w: World, key: string) => `${key}(${w.m.links.get(key)!.id})`;

// ---------------------------------------------------------------------------------------------
// Steps

/** The holder of a link signs with its wallet (PROTOCOL.md §12–§15). */
export async function sign(w: World, p: { pick: number; permille: number; hold: boolean }): Promise<void> {
  counters.steps++;
  const key = w.linkKeys[p.pick % w.linkKeys.length]!;
  const leaf = w.m.links.get(key)!;
  const amount = share(leaf.max, holdShare(p.permille, p.hold));
  // When the model's wallet may sign: from its clock and the payments its ledger counted, to the
  // latest clock reading its ledger kept (§12); the wallet's own SBA tells which it chose.
  const earliest = w.m.walletNow(key);
  const latest = w.m.walletLatest(key);
  w.m.walletTouch(key);
  let out: Outcome;
  let sba: any;
  try {
    sba = await w.session(key).createSba({ amount: String(amount), currency: 'USD', rail: 'x402', hold: p.hold });
    out = { ok: true };
  } catch (e) {
    out = refusal(e);
  }
  const step = `sign ${linkName(w, key)} ${amount}${p.hold ? ' hold' : ''}`;
  // The verdict at the time the wallet signed, or, for a refusal, at either end of its range.
  const signAt = out.ok ? Date.parse(sba.authorization.issuedAt) : latest;
  let verdict = w.m.sign(key, key, amount, signAt);
  if (!out.ok && (verdict.ok || !verdict.codes.includes(out.code))) verdict = w.m.sign(key, key, amount, earliest);
  const until = w.m.sbaExpiry(key, key, w.config.sbaTtlMin * MINUTE, signAt);
  if (out.ok) {
    const a = sba.authorization;
    const rec: SbaRec = {
      sba,
      leaf: key,
      budgetId: a.budgetId,
      max: BigInt(a.maxAmountMinor),
      issuedAt: Date.parse(a.issuedAt),
      expiresAt: Date.parse(a.expiresAt),
      hold: a.capture === 'hold',
      fromWallet: true,
      accepts: 0,
    };
    rec.walletEntry = {
      scope: key,
      budgetId: rec.budgetId,
      chain: w.m.chain(key).map((l) => l.key),
      amount: rec.max,
      at: rec.issuedAt,
      expiresAt: rec.expiresAt,
      hold: rec.hold,
    };
    w.m.record(w.m.wallet(key), rec.walletEntry);
    w.sbas.push(rec);
    w.log(
      `${step} → signed sba ${w.sbas.length - 1} ${rec.budgetId} until ${iso(rec.expiresAt)} ${verdictText(verdict)}`,
    );
    w.checkBounds(step);
    if (rec.issuedAt < earliest || rec.issuedAt > latest || rec.expiresAt !== until)
      w.fail(
        `${step}: signed at ${a.issuedAt} until ${a.expiresAt}; the model: at ${iso(earliest)}–${iso(latest)} ` +
          `until ${iso(until)}`,
      );
    if (rec.hold !== p.hold || rec.max !== amount) w.fail(`${step}: signed ${a.maxAmountMinor} capture ${a.capture}`);
  } else {
    w.log(`${step} → ${out.code} ${verdictText(verdict)}`);
  }
  w.compare(step, verdict, out);
}

/**
 * The holder signs outside its wallet (a second device, a hostile holder): only merchants count
 * it. `reuse` takes another SBA's budgetId (PROTOCOL.md §7; replay is scoped to the signing chain).
 */
export async function rawSign(
  w: World,
  p: { pick: number; permille: number; hold: boolean; issuedMin: number; ttlMin: number; reuse?: number },
): Promise<void> {
  counters.steps++;
  const key = w.linkKeys[p.pick % w.linkKeys.length]!;
  const leaf = w.m.links.get(key)!;
  const amount = share(leaf.max, holdShare(p.permille, p.hold));
  const issuedAt = Math.max(T0, w.m.clock + p.issuedMin * MINUTE);
  const expiresAt = Math.min(issuedAt + p.ttlMin * MINUTE, leaf.expiresAt);
  // Another SBA's id, maybe under another chain, maybe a hold: a capture names the hold by its
  // chain and id (the verifier's holdId), so a stranger's hold under the same id is another one.
  const reuse =
    p.reuse !== undefined && w.sbas.length && !(p.hold && EXCLUDED.has('holdReuse'))
      ? w.sbas[p.reuse % w.sbas.length]
      : undefined;
  if (expiresAt <= issuedAt) {
    w.log(`rawSign ${linkName(w, key)}: nothing to sign`);
    return;
  }
  const budgetId = reuse?.budgetId ?? w.freshId(`raw_${w.grantId}_`);
  let sba: any;
  try {
    sba = await ctl0.createSignedSessionBudgetAuthorization(
      {
        grant: w.artifacts.get(key),
        sessionId: 'raw',
        actorId: `raw-${key}`,
        maxAmountMinor: String(amount),
        budgetScope: 'SESSION',
        budgetId,
        issuedAt: iso(issuedAt),
        expiresAt: iso(expiresAt),
        rail: 'x402',
        hold: p.hold,
      },
      { signingKey: (await signers(ctl0))[w.linkKeys.indexOf(key)]!, now: () => w.m.clock },
    );
  } catch (e) {
    w.log(`rawSign ${linkName(w, key)}: the signer refused (${refusal(e).ok ? '' : (refusal(e) as any).code})`);
    return;
  }
  w.sbas.push({
    sba,
    leaf: key,
    budgetId,
    max: amount,
    issuedAt,
    expiresAt,
    hold: p.hold,
    fromWallet: false,
    accepts: 0,
  });
  const kind = reuse ? (reuse.leaf === key ? 'id of its chain' : 'id of another chain') : 'own id';
  bump(`rawSign: ${kind}${p.hold ? ', hold' : ''}`);
  w.log(
    `rawSign ${linkName(w, key)} ${amount}${p.hold ? ' hold' : ''} → sba ${w.sbas.length - 1} ${budgetId} ` +
      `${iso(issuedAt)}..${iso(expiresAt)}${reuse ? ` (the id of sba ${w.sbas.indexOf(reuse)})` : ''}`,
  );
}

function verifierOf(w: World, b: Build) {
  const m = w.builds[b] as any;
  const fn = b === 'edge' ? m.verifyCtlEdge : m.verifyCtl;
  // `ctl/edge` exports captureCtl (issue item 8); until then the verifier carries it.
  const captureFn = m.captureCtl ?? fn.captureCtl;
  return { verify: fn as Ctl['verifyCtl'], capture: captureFn as Ctl['captureCtl'] };
}

/** A merchant terminal (one of three builds, one ledger) verifies offline against the bundle (§5). */
export async function verify(
  w: World,
  p: { pick: number; build: Build; mode: 'full' | 'part' | 'over' },
): Promise<void> {
  counters.steps++;
  const n = pickSba(w, p.pick);
  const s = w.sbas[n]!;
  const requested = p.mode === 'over' ? s.max + 1n : p.mode === 'part' && !s.hold && s.max > 1n ? s.max / 2n : s.max;
  const now = Math.max(w.m.clock, w.m.floor); // the floored clock of this verification (§12)
  const verdict = w.m.verify(s, requested);
  let out: Outcome;
  try {
    const r = await verifierOf(w, p.build).verify(s.sba, {
      amount: String(requested),
      currency: 'USD',
      trustBundles: [w.bundle],
      rootPublicKeyPem: root.publicKeyPem,
      offline: true,
      trackSpend: true,
      spendStorage: w.merchantStorage,
      timeFloor: w.timeFloor,
      now: () => w.m.clock,
    });
    if (r.valid) {
      out = { ok: true };
      // The hold's name in the storage, where the verifier gives one (a capture after a restart).
      const holdId = (r as { holdId?: unknown }).holdId;
      if (typeof holdId === 'string') s.holdId = holdId;
    } else out = { ok: false, code: r.error.code, message: r.error.message, ...resetsOf(r.error) };
  } catch (e) {
    out = { ok: false, code: 'thrown', message: String(e) };
  }
  const step = `verify sba ${n} (${s.budgetId} under ${linkName(w, s.leaf)}) ${requested} on ${p.build}`;
  w.log(`${step} → ${out.ok ? 'accepted' : out.code} ${verdictText(verdict)}`);
  if (out.ok) {
    s.accepts++;
    const e: Entry = {
      scope: s.leaf,
      budgetId: s.budgetId,
      chain: w.m.chain(s.leaf).map((l) => l.key),
      amount: s.hold ? s.max : requested,
      at: now,
      expiresAt: s.expiresAt,
      hold: s.hold,
    };
    s.merchantEntry ??= e;
    s.acceptedOn ??= p.build;
    w.m.record(w.m.merchant, e);
    w.checkBounds(step);
  }
  w.compare(step, verdict, out);
  w.m.keepReading(out.ok, out.ok ? undefined : out.code);
  await w.syncFloor(step);
}

function resetsOf(error: { resetsAt?: string }): { resetsAt?: string } {
  return error.resetsAt !== undefined ? { resetsAt: error.resetsAt } : {};
}

/** The merchant captures a hold it accepted, or voids it (capture 0), through one of its terminals (§15). */
export async function capture(
  w: World,
  p: { pick: number; build: Build; permille: number },
  sameTerminal = false,
): Promise<void> {
  counters.steps++;
  const holds = w.sbas.filter((s) => s.hold && s.merchantEntry);
  const s = holds[p.pick % holds.length]!;
  // Any terminal of the merchant may capture: they share one ledger (PROTOCOL.md §15, holds live in it).
  if (sameTerminal) p = { ...p, build: s.acceptedOn! };
  const amount = p.permille > 1000 ? s.max + 1n : (s.max * BigInt(p.permille)) / 1000n;
  // A hold is named by its chain and budgetId (PROTOCOL.md §7): of the accepted holds that share the
  // name, the capture meets the live one, if any.
  // Live by the merchant's time: its floor, which a clock set back does not lower (§12).
  const now = w.m.merchantNow();
  const named = w.sbas.filter((t) => t.hold && t.merchantEntry && t.leaf === s.leaf && t.budgetId === s.budgetId);
  const held = named.find((t) => t.merchantEntry!.captured === undefined && now < t.merchantEntry!.expiresAt) ?? s;
  const verdict = w.m.merchantCapture(held.merchantEntry!, amount);
  let out: Outcome;
  try {
    const options = { now: () => w.m.clock, timeFloor: w.timeFloor, spendStorage: w.merchantStorage };
    const r = await verifierOf(w, p.build).capture(s.holdId ?? s.budgetId, String(amount), options);
    out = r.captured ? { ok: true } : { ok: false, code: r.error.code, message: r.error.message };
  } catch (e) {
    out = { ok: false, code: 'thrown', message: String(e) };
  }
  const step = `${amount === 0n ? 'void' : 'capture'} sba ${w.sbas.indexOf(s)} (${s.budgetId}) ${amount} on ${p.build}`;
  w.log(`${step} → ${out.ok ? 'captured' : out.code} ${verdictText(verdict)}`);
  if (out.ok) {
    held.merchantEntry!.captured = amount;
    held.captured = amount;
    w.checkBounds(step);
  }
  w.compare(step, verdict, out);
  if (!EXCLUDED.has('captureFloor')) w.m.keepReading(false, out.ok ? undefined : out.code);
  await w.syncFloor(step);
}

/** The wallet learns a capture from the merchant's receipt (or an amount above the hold) (§15). */
export async function learn(w: World, p: { pick: number; mode: 'receipt' | 'over' }): Promise<void> {
  counters.steps++;
  const holds = w.sbas.filter((s) => s.hold && s.walletEntry);
  const s = holds[p.pick % holds.length]!;
  if (p.mode === 'receipt' && s.captured === undefined) {
    w.log(`learn sba ${w.sbas.indexOf(s)}: no receipt yet`);
    return;
  }
  const amount = p.mode === 'over' ? s.max + 1n : s.captured!;
  const verdict = w.m.walletCapture(s.walletEntry!, amount);
  w.m.walletTouch(s.leaf);
  let out: Outcome;
  try {
    await w.session(s.leaf).capture(s.budgetId, String(amount));
    out = { ok: true };
  } catch (e) {
    out = refusal(e);
  }
  const step = `learn sba ${w.sbas.indexOf(s)} (${s.budgetId}) ${amount}`;
  w.log(`${step} → ${out.ok ? 'settled' : out.code} ${verdictText(verdict)}`);
  if (out.ok) {
    s.walletEntry!.captured = amount;
    w.checkBounds(step);
  }
  w.compare(step, verdict, out);
}

/** The root grant or a link is revoked: a new bundle lists it (§14: a link by its revocation id). */
export async function revoke(w: World, p: { pick: number }): Promise<void> {
  counters.steps++;
  // The root grant one time in eight (it stops everything), a link otherwise.
  const links = w.linkKeys.length > 1 && p.pick % 8 !== 0 ? w.linkKeys.slice(1) : w.linkKeys;
  const key = links[Math.floor(p.pick / 8) % links.length]!;
  const link = w.m.links.get(key)!;
  link.revoked = true;
  const id = key === 'G' ? w.grantId : ctl0.linkRevocationId(w.artifacts.get(key));
  if (!w.revokedIds.includes(id)) w.revokedIds.push(id);
  await w.newBundle();
  w.log(`revoke ${linkName(w, key)} (bundle ${w.bundle.sequence})`);
}

/** The holder of a link delegates part of it (§14), maybe widening it on purpose. */
export async function delegate(w: World, p: import('./spend-harness.js').DelegateParams): Promise<void> {
  counters.steps++;
  const parentKey = w.linkKeys[p.pick % w.linkKeys.length]!;
  const parent = w.m.links.get(parentKey)!;
  const chainIds = w.m.chain(parentKey).map((l) => l.id);
  const max = p.widen === 'amount' ? parent.max + 1n : share(parent.max, p.permille);
  const expiries = [parent.expiresAt, T0 + 3 * HOUR, T0 + 2 * DAY, T0 + 40 * DAY, T0 + 200 * DAY];
  const expiresAt =
    p.widen === 'expiry'
      ? parent.expiresAt + MINUTE
      : Math.min(parent.expiresAt, expiries[p.expiry % expiries.length]!);
  const windows = parent.windows.map((pw) => {
    const lim = pw.max < max ? pw.max : max;
    return { every: pw.every, max: share(lim, p.windowPermille), maxPayments: pw.maxPayments };
  });
  if (p.addWindow && !windows.some((x) => x.every === p.addWindow))
    windows.push({ every: p.addWindow, max: share(max, p.windowPermille), maxPayments: p.maxPayments });
  if (p.widen === 'window' && windows[0] && parent.windows[0]) windows[0].max = parent.windows[0].max + 1n;
  if (p.widen === 'windowAboveOwn' && windows[0]) windows[0].max = max + 1n;
  if (p.widen === 'dropWindow' && parent.windows.length) {
    const dropped = windows.shift()!;
    // Left with none, the child would inherit the parent's windows (createDelegation): name another.
    if (windows.length === 0) windows.push({ ...dropped, every: dropped.every === 'P1Y' ? 'PT1H' : 'P1Y' });
  }
  let id: string;
  if (p.widen === 'ancestorId') id = chainIds[p.id % chainIds.length]!;
  else if (w.config.fewIds) {
    const free = ['d0', 'd1', 'd2', 'd3', 'd4', 'd5', 'd6', 'd7'].filter((x) => !chainIds.includes(x));
    id = free[p.id % 3]!;
  } else id = w.freshId('dlg-');
  const windowsStart = WINDOWS_STARTS[p.startIdx % WINDOWS_STARTS.length]!;
  const child = {
    id,
    max,
    issuedAt: T0,
    expiresAt,
    windows: windows.map((x): WindowRule =>
      x.maxPayments === undefined
        ? { every: x.every, max: x.max }
        : { every: x.every, max: x.max, maxPayments: x.maxPayments },
    ),
    windowsStart: windows.length ? windowsStart : T0,
  };
  const verdict = w.m.delegate(parentKey, child, w.config.maxDepth);
  const key = `L${w.linkKeys.length}`;
  const holder = holderKeys[w.linkKeys.length]!;
  let out: Outcome;
  let d: any;
  try {
    d = await w.session(parentKey).delegate({
      actorKey: holder.publicJwk,
      delegationId: id,
      maxAmountMinor: String(max),
      issuedAt: iso(T0),
      expiresAt: iso(expiresAt),
      ...(windows.length
        ? {
            windows: child.windows.map((x) => ({
              every: x.every,
              maxAmountMinor: String(x.max),
              ...(x.maxPayments !== undefined ? { maxPayments: x.maxPayments } : {}),
            })),
            windowsStart: iso(windowsStart),
          }
        : {}),
    });
    out = { ok: true };
  } catch (e) {
    out = refusal(e);
  }
  const windowText = child.windows.map((x) => `${x.every}:${x.max}${x.maxPayments ? `/${x.maxPayments}` : ''}`);
  const step =
    `delegate ${linkName(w, parentKey)} → ${id} ${max} until ${iso(expiresAt)} windows [${windowText.join(', ')}]` +
    ` from ${iso(child.windowsStart)}${p.widen ? ` (widen: ${p.widen})` : ''}`;
  if (out.ok) {
    w.m.links.set(key, { ...child, key, parent: parentKey, revoked: false, depth: parent.depth + 1 });
    w.linkKeys.push(key);
    w.artifacts.set(key, d);
    w.storages.set(key, w.newStorage());
    w.log(`${step} → link ${key} ${verdictText(verdict)}`);
  } else {
    w.log(`${step} → ${out.code} ${verdictText(verdict)}`);
  }
  w.compare('delegate', verdict, out);
}

/** A new process: new module instances and new objects over the same SpendStorages and time floor. */
export async function restart(w: World, who: 'wallet' | 'merchant' | 'both'): Promise<void> {
  counters.steps++;
  if (who !== 'merchant') {
    w.walletProcess++;
    w.sessions = new Map();
  }
  if (who !== 'wallet') w.merchantProcess++;
  await w.useProcesses();
  w.log(`restart ${who} (wallet process ${w.walletProcess}, merchant process ${w.merchantProcess})`);
}

function verdictText(v: Verdict): string {
  return v.ok ? '(model: ok)' : `(model: ${v.codes.join(' | ')})`;
}
