/**
 * The device operations (README.md § Operations): an offline terminal that verifies SBAs against
 * installed Trust Bundles within each grant's offline allowance (PROTOCOL.md §8 `offline`), and
 * a vehicle wallet that signs SBAs under a grant, with every counter, the rollback floor and the
 * pinned root key kept in the host ABI's storage so a reboot forgets nothing.
 *
 * Written as a function of the library (`createDevice(CTL, abi)`): on Node it takes `src/` (or a
 * role entry), in QuickJS the global `CTL` of a role bundle, so one code path is tested everywhere.
 * A terminal that only verifies runs `dist/ctl-verify.iife.js`, a vehicle that only pays
 * `dist/ctl-wallet.iife.js`; an op the loaded bundle has no part for is `unknown_op`.
 */
import type * as Sdk from '../src/index.js';
import type { PolicyGrant, TrustBundle } from '../src/index.js';
import type { HostAbi } from './abi.js';
import { checkHostAbi } from './abi.js';
import { bindCounterHead, createKvSpendStorage } from './kv-spend-storage.js';
import { createSequenceStore } from './sequence-store.js';
import { createTimeFloorStore } from './time-floor-store.js';
import { createLogOps, type LogOps, type LogSdk } from './log-ops.js';
import { cborDecode } from '../src/entries/compact.js';
import { utf8Decode, utf8Encode } from '../src/index.js';

/**
 * The part of the SDK the device uses: every role bundle has the common part and
 * `verifyTrustBundle` (the wallet reads revocation from installed bundles); the verifier bundle
 * adds `verifyCtl`, the wallet bundle the signing side. `dist/ctl.iife.js` has all of it.
 */
export type DeviceSdk = Pick<
  typeof Sdk,
  'verifyTrustBundle' | 'verifyRootChain' | 'canonicalize' | 'parseStrictJson' | 'parseTimestamp'
> &
  Partial<Pick<typeof Sdk, 'verifyCtl' | 'captureCtl' | 'createSession' | 'generateKeyPair' | 'newId'>> &
  LogSdk;

/** The roles a loaded SDK can play. @example deviceRoles(CTL) // ['verify', 'wallet'] */
export function deviceRoles(sdk: DeviceSdk): Array<'verify' | 'wallet'> {
  const roles: Array<'verify' | 'wallet'> = [];
  if (typeof sdk.verifyCtl === 'function') roles.push('verify');
  if (
    typeof sdk.createSession === 'function' &&
    typeof sdk.generateKeyPair === 'function' &&
    typeof sdk.newId === 'function'
  )
    roles.push('wallet');
  return roles;
}

/**
 * Bridge-level refusals, in addition to the CTL codes of PROTOCOL.md §9 (stable; add, never rename).
 * `not_provisioned`: no root key (or no wallet key/grant) yet; `already_provisioned`: a different
 * root is pinned; `bad_request`: arguments of the wrong shape; `unknown_op`; `bad_frame`: the
 * frame itself is unreadable; `host_failure`: a host ABI call threw; `internal`: a bug.
 */
export const BRIDGE_ERROR_CODES = [
  'not_provisioned',
  'already_provisioned',
  'bad_request',
  'unknown_op',
  'bad_frame',
  'host_failure',
  'internal',
] as const;

/** What verifyTrustBundle answers only after the root's signature checked out. */
const SIGNED_BUT_REFUSED = new Set(['trust_bundle_expired', 'trust_bundle_rollback', 'not_yet_valid']);

/** The revoked ids a bundle lists, when it lists them as it should. */
function revokedIn(bundle: unknown): string[] {
  const list = (bundle as { revokedGrants?: unknown } | null)?.revokedGrants;
  return Array.isArray(list) && list.every((x) => typeof x === 'string') ? list : [];
}

export class DeviceError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'DeviceError';
    this.code = code;
  }
}

const KEY_ROOT = 'ctl/root';
const KEY_BUNDLES = 'ctl/bundles';
const KEY_WALLET = 'ctl/wallet';
/**
 * `{ rootVersion, statements }`: the highest root version accepted and the chain that reaches it (PROTOCOL.md §11);
 * only ever raised, by CAS.
 */
const KEY_ROOT_CHAIN = 'ctl/root-chain';
/**
 * Grant ids revoked by any bundle its root signed (PROTOCOL.md §12: revocations are permanent), a
 * JSON array: a bundle that expires, is superseded or arrives too late takes none of them away.
 * Never pruned by what a payer presents (a revoked id is public): it grows with the fleet's
 * revocations until the device is reprovisioned.
 */
const KEY_REVOKED = 'ctl/revoked';

export interface VerifyRequest {
  sba: unknown;
  amount: string;
  currency: string;
  merchantId?: string;
  rail?: string;
  purpose?: string;
}

export interface BundleInfo {
  scope: Record<string, string>;
  bundleId: string;
  sequence: number;
  issuedAt: string;
  expiresAt: string;
  expired: boolean;
}

export interface Device extends LogOps {
  /**
   * Pins the root public key (PEM) at manufacture. Idempotent for the same key; a different one is
   * `already_provisioned`.
   */
  provisionRoot(args: { rootPublicKeyPem: string }): { provisioned: true };
  /**
   * Verifies a bundle against the pinned root and the persisted floor of its scope, then keeps it (the old one stays
   * until a new one verifies). With `rootChain` (PROTOCOL.md §11), the chain is walked from the pinned root first and
   * must not end below the stored root version; when the bundle then verifies against the newest version's bundle keys,
   * the chain's version is stored before the bundle.
   */
  installBundle(args: { bundle: unknown; rootChain?: unknown }): Promise<BundleInfo & { rootVersion: number }>;
  /**
   * Follows a root chain without a bundle (PROTOCOL.md §11): walked from the pinned root, refused below the stored
   * version, stored when higher.
   */
  updateRoot(args: { rootChain: unknown }): Promise<{ rootVersion: number; changed: boolean }>;
  /**
   * Verifies one offline payment (spec §4.4, offline, spend tracked and counted against `grant.offline`). Never throws
   * on hostile input.
   */
  verify(
    args: VerifyRequest,
  ): Promise<
    | { valid: true; grantId: string; budgetId: string; amount: string; currency: string; holdId?: string }
    | { valid: false; error: { code: string; message: string } }
  >;
  /**
   * Captures a hold `verify` accepted (PROTOCOL.md §15), named by the `holdId` `verify` answered
   * (or the SBA): at most the hold, once, before the SBA expires; the offline allowance then
   * counts the captured amount. Holds live in the flash ledger: a reboot between verify and capture
   * changes nothing, and a hold never captured goes back at the SBA's expiry. Never throws on
   * hostile input.
   */
  capture(args: {
    holdId?: string;
    sba?: unknown;
    amount: string;
  }): Promise<{ captured: true; amountMinor: string } | { captured: false; error: { code: string; message: string } }>;
  /** Vehicle wallet: creates (once) the signing key and installs the grant to draw on. */
  provisionWallet(args: { actorId: string }): Promise<{ actorId: string; publicJwk: unknown }>;
  installGrant(args: { grant: unknown }): { grantId: string };
  /**
   * Vehicle wallet: signs the SBA for one payment (spend persisted, revocation from the installed
   * bundles). With `hold`, the amount stays reserved in flash, whole, across reboots and past the
   * SBA's expiry, until `settleHold` (PROTOCOL.md §15).
   */
  createSba(args: {
    amount: string;
    currency: string;
    rail: string;
    merchantId?: string;
    purpose?: string;
    hold?: boolean;
  }): Promise<unknown>;
  /**
   * Vehicle wallet: settles a hold it signed with what the merchant captured, as the merchant's
   * receipt says ("0": a void); the rest goes back. Refused: `capture_exceeds_hold`, `replay`,
   * `hold_expired` (no such hold).
   */
  settleHold(args: { budgetId: string; amount: string }): Promise<{ settled: true; amountMinor: string }>;
  /** Root, bundles with their floors, and for `grantId` the spend and offline counters. */
  status(args?: { grantId?: string }): Promise<Record<string, unknown>>;
}

/** Parses an artifact given as an object, JSON text, or bytes (compact CBOR or JSON text). */
function artifactValue(sdk: DeviceSdk, v: unknown, what: string): unknown {
  if (typeof v === 'string') return sdk.parseStrictJson(v);
  if (v instanceof Uint8Array) return v[0] === 0x7b /* '{' */ ? sdk.parseStrictJson(utf8Decode(v)) : cborDecode(v);
  if (typeof v === 'object' && v !== null) return v;
  throw new DeviceError('bad_request', `${what}: expected an object, JSON text or compact bytes`);
}

/**
 * @example const device = createDevice(CTL, abi); device.provisionRoot({ rootPublicKeyPem }); await
 * device.installBundle({ bundle }); await device.verify({ sba, amount: '1200', currency: 'EUR' })
 */
export function createDevice(sdk: DeviceSdk, abi: HostAbi): Device {
  checkHostAbi(abi);
  const roles = deviceRoles(sdk);
  /** The SDK part an op needs, or `unknown_op`: the loaded bundle has no such role. */
  const part = <K extends 'verifyCtl' | 'captureCtl' | 'createSession' | 'generateKeyPair' | 'newId'>(
    name: K,
    op: string,
  ): NonNullable<DeviceSdk[K]> => {
    const f = sdk[name];
    if (typeof f !== 'function')
      throw new DeviceError(
        'unknown_op',
        `${op}: this device runs the ${roles.join('+') || 'no'} bundle, without ${name}`,
      );
    return f as NonNullable<DeviceSdk[K]>;
  };
  // Host failures inside the SDK (e.g. a flash read in the middle of verifyCtl) come back as a
  // generic refusal; remembering them lets the device report `host_failure` (README § Errors).
  let hostFailure: string | undefined;
  const guard = <T>(what: string, f: () => T): T => {
    try {
      return f();
    } catch (e) {
      hostFailure = `${what}: ${e instanceof Error ? e.message : String(e)}`;
      throw new DeviceError('host_failure', hostFailure);
    }
  };
  const storage: HostAbi['storage'] = {
    get: (key) => guard('storage.get', () => abi.storage.get(key)),
    put: (key, value) => guard('storage.put', () => abi.storage.put(key, value)),
    compareAndSet: (key, e, v) => guard('storage.compareAndSet', () => abi.storage.compareAndSet(key, e, v)),
  };
  const hw = abi.monotonicCounter;
  const counter = hw
    ? {
        read: () => guard('monotonicCounter.read', () => hw.read()),
        increment: () => guard('monotonicCounter.increment', () => hw.increment()),
      }
    : undefined;
  // With a counter, the ledger head is bound at provisioning: afterwards a missing head is a
  // deleted one, refused like an old one (README.md § What the bound does not cover).
  const ledgers = createKvSpendStorage(storage, counter ? { counter, onMissingHead: 'refuse' } : {});
  // A ledger that cannot answer (corrupt record, flash older than the counter) is a host failure.
  const spend: typeof ledgers = {
    reserve: (key, id, amount, ceiling, o) =>
      guard('spend storage', () => ledgers.reserve(key, id, amount, ceiling, o)),
    commit: (key, id) => guard('spend storage', () => ledgers.commit(key, id)),
    release: (key, id) => guard('spend storage', () => ledgers.release(key, id)),
    total: (key) => guard('spend storage', () => ledgers.total(key)),
    reserveMany: (id, counters, o) => guard('spend storage', () => ledgers.reserveMany!(id, counters, o)),
    commitMany: (id, captured, o) => guard('spend storage', () => ledgers.commitMany!(id, captured, o)),
    releaseMany: (id) => guard('spend storage', () => ledgers.releaseMany!(id)),
  };
  const bindHead = () => {
    if (counter) bindCounterHead(storage, counter);
  };
  const floors = createSequenceStore(storage);
  // PROTOCOL.md §12: every time check of the device uses max(clock, floor); the floor survives reboots.
  const timeFloor = createTimeFloorStore(storage);
  /**
   * The host's clock, checked where it enters (PROTOCOL.md §12: time is a number or nothing): a
   * reading that is not a finite number is a host failure, and nothing is accepted on it.
   */
  const clockNow = (): number => {
    const t = guard('clock', () => abi.now());
    if (typeof t !== 'number' || !Number.isFinite(t)) {
      hostFailure = 'clock: now() did not return finite milliseconds since the epoch';
      throw new DeviceError('host_failure', hostFailure);
    }
    return t;
  };
  const flooredNow = () => Math.max(clockNow(), timeFloor.get());
  const k = (s: string) => utf8Encode(s);

  const readJson = (key: string): any => {
    const raw = storage.get(k(key));
    return raw === null ? undefined : JSON.parse(utf8Decode(raw));
  };
  /** CAS update of a JSON record. */
  const updateJson = (key: string, change: (cur: any) => any): void => {
    for (let i = 0; i < 64; i++) {
      const raw = storage.get(k(key));
      const next = change(raw === null ? undefined : JSON.parse(utf8Decode(raw)));
      if (storage.compareAndSet(k(key), raw, utf8Encode(JSON.stringify(next)))) return;
    }
    throw new DeviceError('host_failure', `compare-and-set on ${key} lost 64 times`);
  };

  const root = (): string => {
    const raw = storage.get(k(KEY_ROOT));
    if (raw === null) throw new DeviceError('not_provisioned', 'no root key is provisioned on this device');
    return utf8Decode(raw);
  };
  /** The stored root chain: version 1 (the pinned key alone) until a rotation was accepted. */
  const rootChain = (): { rootVersion: number; statements: unknown[] } => {
    const rec = readJson(KEY_ROOT_CHAIN);
    if (rec === undefined) return { rootVersion: 1, statements: [] };
    if (!Number.isSafeInteger(rec?.rootVersion) || !Array.isArray(rec?.statements))
      throw new DeviceError('host_failure', 'root chain record is corrupt'); // fail closed
    return rec;
  };
  const chainValue = (v: unknown): unknown[] => {
    const list = artifactValue(sdk, v, 'rootChain');
    if (!Array.isArray(list))
      throw new DeviceError('bad_request', 'rootChain: expected an array of ctl-root/1 statements');
    return list;
  };
  /**
   * Raises the stored root chain to `statements` (already verified to reach `rootVersion`), never
   * lowering it: a concurrent or earlier higher version wins, and `root_rollback` is answered.
   */
  const storeRootChain = (rootVersion: number, statements: unknown[]): boolean => {
    let changed = false;
    updateJson(KEY_ROOT_CHAIN, (cur) => {
      const stored = cur?.rootVersion ?? 1;
      if (stored > rootVersion) throw new DeviceError('root_rollback', `root version ${stored} was accepted meanwhile`);
      changed = stored < rootVersion;
      return changed ? { rootVersion, statements } : cur;
    });
    if (changed) abi.log('info', `root version ${rootVersion} accepted`);
    return changed;
  };
  const bundles = (): TrustBundle[] => Object.values((readJson(KEY_BUNDLES) ?? {}) as Record<string, TrustBundle>);
  const scopeKey = (scope: unknown) => sdk.canonicalize(scope ?? {});
  const info = (b: TrustBundle, now: number): BundleInfo => ({
    scope: b.scope as Record<string, string>,
    bundleId: b.bundleId,
    sequence: b.sequence,
    issuedAt: b.issuedAt,
    expiresAt: b.expiresAt,
    expired: now >= Date.parse(b.expiresAt),
  });
  const keptRevocations = (): string[] => {
    const list = readJson(KEY_REVOKED) ?? [];
    if (!Array.isArray(list)) throw new DeviceError('host_failure', 'the revocation record is corrupt'); // fail closed
    return list;
  };
  /** Adds `ids` to the persisted revocations. */
  const updateRevocations = (ids: readonly string[]): void => {
    if (ids.length === 0) return;
    updateJson(KEY_REVOKED, (cur: string[] = []) => {
      const set = new Set(cur);
      const before = set.size;
      for (const id of ids) set.add(id);
      return set.size === before ? cur : [...set].sort();
    });
  };

  /**
   * The wallet's revocation source offline: installed bundles' `revokedGrants` and those kept (fail closed without a
   * live bundle).
   */
  const bundleRevocationFetch = async (url: string) => {
    const grant = readJson(KEY_WALLET)?.grant as PolicyGrant | undefined;
    const now = flooredNow();
    const installed = bundles();
    if (!grant || url !== grant.revocationUrl || !installed.some((b) => now < Date.parse(b.expiresAt)))
      return { ok: false, status: 503, text: async () => '' };
    const revoked =
      keptRevocations().includes(grant.grantId) || installed.some((b) => b.revokedGrants.includes(grant.grantId));
    return { ok: true, status: 200, text: async () => JSON.stringify({ grantId: grant.grantId, revoked }) };
  };

  const deviceFail = (code: string, message: string): never => {
    throw new DeviceError(code, message);
  };

  /** The vehicle wallet's session over the flash ledger: a new object per call, as after a reboot. */
  const walletSession = (op: string) => {
    const createSession = part('createSession', op);
    const w = readJson(KEY_WALLET);
    if (!w?.privateKeyPem || !w.grant) throw new DeviceError('not_provisioned', 'the wallet has no key or no grant');
    return createSession(w.grant, {
      actorId: w.actorId,
      signingKey: w.privateKeyPem,
      sessionId: w.sessionId,
      spendStorage: spend,
      revocationTtl: 0,
      fetch: bundleRevocationFetch as never,
      now: flooredNow,
      scope: 'TRIP',
    });
  };

  return {
    ...createLogOps(sdk, storage, deviceFail, (v, what) => artifactValue(sdk, v, what)),
    provisionRoot({ rootPublicKeyPem }) {
      if (typeof rootPublicKeyPem !== 'string' || !rootPublicKeyPem.includes('PUBLIC KEY')) {
        throw new DeviceError('bad_request', 'rootPublicKeyPem must be an SPKI PEM public key');
      }
      const pem = utf8Encode(rootPublicKeyPem.trim() + '\n');
      bindHead(); // also binds a device provisioned before it had a counter, when provisioned again
      if (storage.compareAndSet(k(KEY_ROOT), null, pem)) {
        abi.log('info', 'root key provisioned');
        return { provisioned: true };
      }
      if (root() === rootPublicKeyPem.trim() + '\n') return { provisioned: true };
      throw new DeviceError(
        'already_provisioned',
        'a different root key is already pinned (spec §5: the root is installed once)',
      );
    },

    async updateRoot({ rootChain: input }) {
      const pem = root();
      const statements = chainValue(input);
      const stored = rootChain();
      // `accepted`: the chain must extend the stored one (a leaked retired root key cannot fork it).
      const r = await sdk.verifyRootChain(pem, statements, {
        minVersion: stored.rootVersion,
        accepted: stored.statements,
      });
      if (!r.valid) throw new DeviceError(r.error.code, r.error.message);
      const changed = r.rootVersion > stored.rootVersion && storeRootChain(r.rootVersion, statements);
      return { rootVersion: r.rootVersion, changed };
    },

    async installBundle({ bundle: input, rootChain: chainInput }) {
      const pem = root();
      const bundle = artifactValue(sdk, input, 'bundle') as TrustBundle;
      const stored = rootChain();
      const statements = chainInput === undefined ? stored.statements : chainValue(chainInput);
      if (chainInput !== undefined) {
        // A chain given with the bundle must extend the stored one (a leaked retired root key cannot fork it).
        const walk = await sdk.verifyRootChain(pem, statements, {
          minVersion: stored.rootVersion,
          accepted: stored.statements,
        });
        if (!walk.valid) throw new DeviceError(walk.error.code, walk.error.message);
      }
      let key: string;
      try {
        key = scopeKey((bundle as { scope?: unknown }).scope);
      } catch {
        throw new DeviceError('malformed', 'bundle.scope is not JSON');
      }
      const clock = clockNow();
      const r = await sdk.verifyTrustBundle(bundle, pem, {
        now: () => Math.max(clock, timeFloor.get()),
        minSequence: floors.min(key),
        rootChain: statements,
        minRootVersion: stored.rootVersion,
        acceptedRootChain: stored.statements,
      });
      if (!r.valid) {
        if (r.error.code === 'trust_bundle_expired') timeFloor.raise(clock); // seen expired: keep it so
        // These come after the root's signature checked out (verifyTrustBundle's order): too old or
        // too late to vouch, but what it revoked is the root's word all the same.
        if (SIGNED_BUT_REFUSED.has(r.error.code)) updateRevocations(revokedIn(bundle));
        throw new DeviceError(r.error.code, r.error.message);
      }
      timeFloor.raise(Math.max(clock, Date.parse(r.bundle.issuedAt)));
      // Its revocations first: once kept, no later bundle (or its absence) can take them back.
      updateRevocations(r.bundle.revokedGrants);
      // The root version before the bundle: a crash in between leaves the new root with the old
      // bundle, which verify() then refuses (an older root's bundle) until the bundle is sent again.
      if (r.rootVersion > stored.rootVersion) storeRootChain(r.rootVersion, statements);
      // Floor first: a crash after it leaves the old bundle in place and the floor raised, which
      // refuses nothing that should pass (the new bundle, sent again, has sequence = floor).
      if (!floors.raise(key, r.bundle.sequence))
        throw new DeviceError('trust_bundle_rollback', 'a newer bundle of this scope was accepted meanwhile');
      updateJson(KEY_BUNDLES, (cur = {}) => {
        const old = cur[key] as TrustBundle | undefined;
        return old && old.sequence > r.bundle.sequence ? cur : { ...cur, [key]: r.bundle };
      });
      abi.log('info', `bundle ${r.bundle.bundleId} sequence ${r.bundle.sequence} installed for scope ${key}`);
      return { ...info(r.bundle, Math.max(clock, timeFloor.get())), rootVersion: r.rootVersion };
    },

    async verify(req) {
      hostFailure = undefined;
      const verifyCtl = part('verifyCtl', 'verify');
      try {
        if (typeof req !== 'object' || req === null)
          throw new DeviceError('bad_request', 'verify: expected { sba, amount, currency }');
        const pem = root();
        const chain = rootChain();
        const installed = bundles();
        if (installed.length === 0)
          return { valid: false, error: { code: 'issuer_not_trusted', message: 'no Trust Bundle is installed' } };
        const sba = artifactValue(sdk, req.sba, 'sba');
        const kept = keptRevocations();
        const r = await verifyCtl(sba, {
          amount: req.amount,
          currency: req.currency,
          merchantId: req.merchantId,
          rail: req.rail,
          purpose: req.purpose,
          offline: true,
          trackSpend: true,
          spendStorage: spend,
          keptRevocations: kept,
          trustBundles: installed,
          rootPublicKeyPem: pem,
          rootChain: chain.statements,
          minRootVersion: chain.rootVersion,
          acceptedRootChain: chain.statements,
          now: clockNow,
          timeFloor,
        });
        if (!r.valid && hostFailure !== undefined)
          return { valid: false, error: { code: 'host_failure', message: hostFailure } };
        if (!r.valid) {
          abi.log('warn', `refused: ${r.error.code}`);
          return { valid: false, error: { code: r.error.code, message: r.error.message } };
        }
        return {
          valid: true,
          grantId: r.grant.grantId,
          budgetId: r.sba.authorization.budgetId,
          amount: r.amount,
          currency: r.currency,
          ...(r.holdId !== undefined ? { holdId: r.holdId } : {}),
        };
      } catch (e) {
        const err = e as { code?: string; message?: string };
        return {
          valid: false,
          error: { code: typeof err?.code === 'string' ? err.code : 'malformed', message: String(err?.message ?? e) },
        };
      }
    },

    async capture(req) {
      hostFailure = undefined;
      const captureCtl = part('captureCtl', 'capture');
      if (typeof req !== 'object' || req === null || (req.holdId === undefined && req.sba === undefined))
        throw new DeviceError(
          'bad_request',
          'capture: expected { holdId, amount } (holdId from verify) or { sba, amount }',
        );
      const hold = req.holdId !== undefined ? req.holdId : (artifactValue(sdk, req.sba, 'sba') as object);
      // The flash ledger the verification used, and its clock (PROTOCOL.md §15).
      const r = await captureCtl(hold, req.amount, { spendStorage: spend, now: clockNow, timeFloor });
      if (!r.captured && hostFailure !== undefined)
        return { captured: false, error: { code: 'host_failure', message: hostFailure } };
      if (!r.captured) return { captured: false, error: { code: r.error.code, message: r.error.message } };
      abi.log('info', `hold ${typeof hold === 'string' ? hold : 'of the SBA given'} captured at ${r.amountMinor}`);
      return r;
    },

    async provisionWallet({ actorId }) {
      const generateKeyPair = part('generateKeyPair', 'provisionWallet');
      const newId = part('newId', 'provisionWallet');
      if (typeof actorId !== 'string' || !/^[A-Za-z0-9._:-]{1,128}$/.test(actorId))
        throw new DeviceError('bad_request', 'actorId must be an identifier');
      bindHead();
      const cur = readJson(KEY_WALLET);
      if (cur?.privateKeyPem) return { actorId: cur.actorId, publicJwk: cur.publicJwk };
      const pair = await generateKeyPair({ alg: 'EdDSA' });
      const wallet = {
        actorId,
        privateKeyPem: pair.privateKeyPem,
        publicJwk: pair.publicJwk,
        sessionId: newId('sess_'),
      };
      if (!storage.compareAndSet(k(KEY_WALLET), null, utf8Encode(JSON.stringify(wallet)))) {
        const now = readJson(KEY_WALLET);
        return { actorId: now.actorId, publicJwk: now.publicJwk };
      }
      abi.log('info', `wallet key created for ${actorId}`);
      return { actorId, publicJwk: pair.publicJwk };
    },

    installGrant({ grant: input }) {
      const createSession = part('createSession', 'installGrant');
      const grant = artifactValue(sdk, input, 'grant') as PolicyGrant;
      if (!readJson(KEY_WALLET)?.privateKeyPem)
        throw new DeviceError('not_provisioned', 'provision the wallet before installing a grant');
      // The grant is checked fully when the session is built (createSession parses it).
      createSession(grant, { actorId: 'check', signingKey: readJson(KEY_WALLET).privateKeyPem });
      updateJson(KEY_WALLET, (cur) => ({ ...cur, grant }));
      return { grantId: grant.grantId };
    },

    async createSba(payment) {
      if (typeof payment !== 'object' || payment === null || !['boolean', 'undefined'].includes(typeof payment.hold))
        throw new DeviceError('bad_request', 'createSba: expected { amount, currency, rail, …, hold?: boolean }');
      return walletSession('createSba').createSba(payment);
    },

    async settleHold(args) {
      if (typeof args !== 'object' || args === null)
        throw new DeviceError('bad_request', 'settleHold: expected { budgetId, amount }');
      await walletSession('settleHold').capture(args.budgetId, args.amount);
      abi.log('info', `hold ${args.budgetId} settled at ${args.amount}`);
      return { settled: true, amountMinor: args.amount };
    },

    async status(args = {}) {
      hostFailure = undefined;
      const provisioned = storage.get(k(KEY_ROOT)) !== null;
      // A clock below the floor is reported, not an error (PROTOCOL.md §12): checks use the floor.
      // A clock that fails is reported too: status answers whatever the host's clock does.
      const floor = timeFloor.get();
      let clock: number | null = null;
      try {
        clock = clockNow();
      } catch {
        /* hostFailure says why */
      }
      const now = Math.max(clock ?? 0, floor);
      const time =
        clock === null
          ? { clock, floor, clockError: hostFailure }
          : { clock, floor, clockBehindFloorMs: Math.max(0, floor - clock) };
      const installed = bundles();
      const list = installed.map((b) => ({ ...info(b, now), minSequence: floors.min(scopeKey(b.scope)) }));
      const out: Record<string, unknown> = {
        provisioned,
        roles,
        rootVersion: provisioned ? rootChain().rootVersion : null,
        bundles: list,
        time,
      };
      const w = readJson(KEY_WALLET);
      if (w) out['wallet'] = { actorId: w.actorId, grantId: w.grant?.grantId ?? null, publicJwk: w.publicJwk };
      const grantId = args.grantId ?? w?.grant?.grantId;
      if (typeof grantId === 'string') {
        // The offline allowance counts per refresh epoch, held in a register (verifyCtl's spendLedgers).
        const epoch = `${grantId}@${await spend.total(`offline-epoch:${grantId}`)}`;
        const c: Record<string, string> = {
          acceptedMinor: (await spend.total(`grant:${grantId}`)).toString(),
          offlinePayments: (await spend.total(`offline-count:${epoch}`)).toString(),
          offlineAmountMinor: (await spend.total(`offline-amount:${epoch}`)).toString(),
        };
        if (w?.grant?.grantId === grantId) {
          // The wallet's total belongs to the grant (PROTOCOL.md §12; src/wallet/session.ts keys it so).
          const spent = await spend.total(`wallet:${grantId}`);
          c['walletSpentMinor'] = spent.toString();
          c['walletRemainingMinor'] = (BigInt(w.grant.maxAmountMinor) - spent).toString();
        }
        out['grant'] = { grantId, ...c };
      }
      return out;
    },
  };
}
