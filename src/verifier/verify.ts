/**
 * The merchant verifier (spec §4.4, PROTOCOL.md §5): parse → grant signature → SBA signature →
 * revocation → amounts → destination, failing closed, the first failing check giving the code.
 * It never throws: hostile input is `{ valid: false, error }`.
 *
 * Built by `createVerifier(crypto)` so `dist/edge.js` can carry a WebCrypto-only copy.
 */
import type { CtlCrypto, PublicJwk, PublicKeyInput } from '../crypto/types.js';
import type {
  Asset,
  Delegation,
  Jwks,
  PolicyGrant,
  SignedBudgetAuthorization,
  TrustBundle,
} from '../artifacts/types.js';
import { checkSba, intentHashWith, sbaSignedText } from '../artifacts/sba.js';
import { createBundleCache } from './bundle-cache.js';
import { bundleSignersWith, type BundleSigners } from './root-chain.js';
import { verifyArtifactSignature } from '../artifacts/signing.js';
import { findKey } from '../artifacts/keys.js';
import { CtlError, toErrorInfo, type CtlErrorInfo, fail } from '../errors.js';
import { canonicalize, parseStrictJson, sameCanonical } from '../encoding/jcs.js';
import { artifactData } from '../encoding/frozen-copy.js';
import { base64urlDecode } from '../encoding/base64url.js';
import { utf8Encode } from '../encoding/utf8.js';
import {
  checkWindow,
  parseCurrency,
  parsePaymentAmount,
  parseTimestamp,
  purposeAllowed,
  timeOption,
} from '../values.js';
import { hostEnv, hostNow } from '../host.js';
import type { RevocationChecker } from '../revocation.js';
import { createSourceChecker, revocationTokenId, type RevocationSource } from '../revocation-source.js';
import type { FetchLike } from '../net/fetch-json.js';
import { createCaptureCtl, type CaptureCtl } from './capture.js';
import { createMemorySpendStorage, type SpendStorage } from '../wallet/spend-storage.js';
import {
  commitAll,
  LEDGER_CLOCK_KEYS,
  ledgerNow,
  reservationId,
  raiseRegister,
  reserveAll,
  velocityLedgers,
  windowLedgers,
  type Ledger,
} from '../wallet/ledgers.js';
import { readFlooredTime, type TimeFloor } from './time-floor.js';
import { featureOf, viaModule, type VerifierFeatures } from './features.js';
import { passUnsupported } from '../crypto/algorithm-support.js';
import { remember } from '../crypto/cache.js';
import { chainOf, effectiveGrant, type DelegationChain } from '../artifacts/delegation.js';
import { walkDelegationChain, type LinkSignatureCache } from './delegation-chain.js';
import { chainIds, chainScope, linkLedgers, linkRevocationUrl } from '../wallet/chain-ledgers.js';

export interface VerifyCtlOptions {
  /** The payment in front of the merchant, minor units. */
  amount: string;
  currency: string;
  /** This merchant, checked against the grant's destinationAllowlist. */
  merchantId?: string;
  rail?: string;
  purpose?: string;
  asset?: Asset;
  /** Trust Bundles to resolve the authority's key from, checked against `rootPublicKeyPem`. */
  trustBundles?: unknown[];
  rootPublicKeyPem?: PublicKeyInput;
  /**
   * The root chain (PROTOCOL.md §11: `ctl-root/1` statements from version 2 up), walked from
   * `rootPublicKeyPem`: bundles are then accepted only when signed by a `bundleKeys` key of the
   * newest version (a bundle of an older root is `trust_bundle_invalid`); a broken chain is
   * `root_rotation_invalid`.
   */
  rootChain?: unknown[];
  /** The highest root version accepted before (persisted by the caller): a chain ending below it is `root_rollback`. */
  minRootVersion?: number;
  /**
   * The root chain this verifier accepted before (persisted by the caller, as `verifyRootChain`'s
   * `accepted`): `rootChain` must repeat it statement for statement before adding any, else
   * `root_rotation_invalid`. A chain that arrived with a bundle is never trusted as accepted: walked
   * from the pin alone, a fork signed by a retired root key that has leaked would pass.
   */
  acceptedRootChain?: unknown[];
  /** The authority's JWKS, given or fetched from `jwksUrl` (cached for `jwksTtl` ms, default 300 000). */
  jwks?: Jwks;
  jwksUrl?: string;
  jwksTtl?: number;
  /**
   * The authority's grant key (spec §4.4 key fallback; `CTL_SBA_SIGNING_PUBLIC_KEY_PEM` where the host has an
   * environment).
   */
  signingKeyPem?: PublicKeyInput;
  /**
   * No network at all: revocation comes from the bundles' `revokedGrants` only, `grant.offline`
   * limits apply, and every `budgetId` accepted is recorded whatever `trackSpend` says (PROTOCOL.md
   * §12: offline means replay-tracked), in `spendStorage` or, without one, in this verifier's memory.
   */
  offline?: boolean;
  /**
   * Grant ids revoked by bundles accepted before (persisted by the caller): refused as
   * `grant_revoked` even when no bundle given now lists them. A verifier keeps in memory the
   * revocations of every bundle that passed its root check (PROTOCOL.md §12); this carries them
   * across restarts.
   */
  keptRevocations?: ReadonlySet<string> | readonly string[];
  /**
   * Where revocation is read instead of the grant's `revocationUrl` (PROTOCOL.md §5 step 3): the
   * host's source, e.g. a chain's revocation tokens (`revocationTokenCallData`), asked for every
   * id of the chain, cached `revocationTtl`; a source that throws is `revocation_unavailable`.
   * Bundles' revocations still apply; asked even with `offline` (the host chose the source).
   */
  revocationSource?: RevocationSource;
  /** Milliseconds a revocation answer is cached (default 60 000, the spec's merchant example). */
  revocationTtl?: number;
  revocationTimeoutMs?: number;
  /**
   * Record each `budgetId` once, keep cumulative spend per grant within `maxAmountMinor`, and enforce the grant's
   * `velocity`. Default `false` online (the same SBA then verifies every time it is presented); always on with
   * `offline`.
   */
  trackSpend?: boolean;
  spendStorage?: SpendStorage;
  /**
   * Recompute `intentHash` from this payment and refuse without it (spec's Full profile; always on under a human-agent
   * grant).
   */
  requireIntentHash?: boolean;
  /**
   * did:key DIDs of the people whose human-agent grants this merchant accepts (PROTOCOL.md §10), besides
   * those a Trust Bundle lists as issuers. A DID is self-certifying, never self-trusting: without
   * either, a human-issued grant is `issuer_not_trusted`.
   */
  trustedHumans?: readonly string[];
  fetch?: FetchLike;
  now?: () => number;
  clockToleranceMs?: number;
  /**
   * The persisted time floor (PROTOCOL.md §12): every time check uses max(clock, floor); the floor
   * is raised to clock readings (at most once a minute, and on each accepted payment) and to the
   * `issuedAt` of the Trust Bundles its root signed, never to a payer's SBA or grant. An offline
   * terminal should always pass one.
   */
  timeFloor?: TimeFloor;
}

export type VerifyCtlResult =
  | {
      valid: true;
      /** The root grant (under a delegation chain, the grant the chain hangs from). */
      grant: PolicyGrant;
      /** Its `grant` is a `Delegation` when drawn under a chain (PROTOCOL.md §14). */
      sba: SignedBudgetAuthorization<PolicyGrant | Delegation>;
      amount: string;
      currency: string;
      merchantId?: string;
      /**
       * For a hold accepted with spend tracked (PROTOCOL.md §15): the name of the hold in the
       * `spendStorage`, for `captureCtl(holdId, amount, { spendStorage })`. Persist it to capture
       * after a restart.
       */
      holdId?: string;
    }
  | { valid: false; error: CtlErrorInfo };

export type VerifyCtl = ((sba: unknown, options: VerifyCtlOptions) => Promise<VerifyCtlResult>) & {
  /** Captures a hold this verifier accepted (PROTOCOL.md §15). */
  captureCtl?: CaptureCtl;
};

/**
 * A verifier with its own caches (grant signatures, bundles, JWKS, revocation, spend). `builtIn`:
 * the optional modules this build carries (features.ts); the others come from registration.
 */
export function createVerifier(c: CtlCrypto, builtIn: VerifierFeatures = {}): VerifyCtl {
  /**
   * By grant signature; only grants that passed `checkSba` get here, so `jcs` is a checked text,
   * and `value` the data parsed from it (what a later grant is matched against, by value).
   */
  const grantChecked = new Map<string, { jcs: string; value: unknown; keyId: string; ok: boolean }>();
  const bundles = createBundleCache(c);
  const jwksCache = new Map<string, { at: number; jwks: Jwks }>();
  const didKeys = new Map<string, PublicJwk>();
  let revocation: RevocationChecker | undefined;
  let askSource: ReturnType<typeof createSourceChecker> | undefined;
  const defaultSpend = createMemorySpendStorage();
  const turns = new Map<string, Promise<unknown>>();
  /** Walked chains, keyed by the bytes of root + chain (never by object): a payment does not re-verify the chain. */
  const signersCache = new Map<string, Promise<BundleSigners>>();
  const linkSignatures: LinkSignatureCache = new Map();

  /**
   * The revocations of every bundle that passed its root check (PROTOCOL.md §12: revocations are
   * permanent). An expired or superseded bundle vouches for no key, but what it revoked stays
   * revoked, on every path (bundles, JWKS, a pinned key). Never pruned by what a payer presents:
   * a revoked id is public, and anyone could show an expired grant bearing it. So the set grows
   * with the revocations this process has seen; a host that restarts passes `keptRevocations`.
   */
  const keptRevoked = new Set<string>();
  const merged = new WeakSet<object>();
  function keepRevocations(checked: { revoked: ReadonlySet<string> }): void {
    if (merged.has(checked)) return;
    for (const id of checked.revoked) keptRevoked.add(id);
    merged.add(checked);
  }

  async function signersFor(o: VerifyCtlOptions): Promise<BundleSigners> {
    const root = o.rootPublicKeyPem!;
    let rootId: string;
    let chainId: string;
    let acceptedId: string;
    try {
      rootId = typeof root === 'string' ? root : canonicalize(await c.toPublicJwk(root));
      // JSON text of the chains as the caller holds them now (native, so cheap per payment); what
      // is walked is parsed back from this very text, so the cached verdict belongs to these bytes.
      chainId = o.rootChain === undefined ? '-' : JSON.stringify(o.rootChain);
      acceptedId = o.acceptedRootChain === undefined ? '-' : JSON.stringify(o.acceptedRootChain);
      if (typeof chainId !== 'string' || typeof acceptedId !== 'string') throw new Error('not JSON');
    } catch {
      return fail('malformed', 'rootPublicKeyPem, rootChain or acceptedRootChain is not usable');
    }
    const key = `${rootId}\u0000${chainId}\u0000${acceptedId}\u0000${o.minRootVersion ?? ''}`;
    let p = signersCache.get(key);
    if (!p) {
      const parse = (text: string) => (text === '-' ? undefined : parseStrictJson(text));
      p = bundleSignersWith(c, root, parse(chainId), o.minRootVersion, parse(acceptedId));
      remember(signersCache, key, p, 64);
    }
    return p;
  }

  /** Runs `fn` after every earlier call with the same key has settled. */
  async function oneAtATime<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = turns.get(key) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    turns.set(key, tail);
    try {
      return await run;
    } finally {
      if (turns.get(key) === tail) turns.delete(key);
    }
  }

  /**
   * PROTOCOL.md §5 step 1 through Trust Bundles. For a human-agent grant, `human` carries the DID's
   * key (the bundle entry must be that key) and whether `trustedHumans` already trusts the DID
   * (then the bundles only add their revocations).
   */
  async function keyFromBundles(
    grant: PolicyGrant,
    o: VerifyCtlOptions,
    now: number,
    tol: number,
    human?: { jwk: PublicJwk; listed: boolean },
  ) {
    if (!o.rootPublicKeyPem)
      fail('malformed', 'trustBundles need rootPublicKeyPem (the root never comes from a bundle)');
    const signers = await signersFor(o);
    const valid: TrustBundle[] = [];
    let expiredLists = false;
    let invalidLists = false;
    for (const b of o.trustBundles!) {
      // The verifier's own frozen copy of what the root signed, never the caller's object (PROTOCOL.md §12).
      const checked = await bundles.check(b, signers);
      if (!checked) continue; // unreadable: it cannot vouch for anyone
      const bundle = checked.bundle;
      const lists = bundle.issuers.some((i) => i.issuer === grant.issuer);
      if (!checked.signatureOk) {
        invalidLists ||= lists;
        continue;
      }
      // Signed by the root: what it revoked stands from now on, whatever its age (PROTOCOL.md §12).
      keepRevocations(checked);
      const expired = now >= parseTimestamp(bundle.expiresAt, 'bundle.expiresAt') + tol;
      const future = parseTimestamp(bundle.issuedAt, 'bundle.issuedAt') > now + tol;
      if (expired || future) {
        expiredLists ||= lists && expired;
        continue;
      }
      valid.push(bundle);
    }
    // Per scope only the newest bundle counts: an older one passed beside it must not keep a key
    // alive that the newer one dropped (PROTOCOL.md §4 `sequence`). Revocations are unioned, which
    // can only refuse more.
    const newest = new Map<string, TrustBundle>();
    for (const b of valid) {
      const scope = canonicalize(b.scope);
      const seen = newest.get(scope);
      if (!seen || b.sequence > seen.sequence) newest.set(scope, b);
    }
    const vouching = [...newest.values()].filter((b) => b.issuers.some((i) => i.issuer === grant.issuer));
    // Revocation freshness for a person trusted by `trustedHumans` alone: the newest bundle given.
    if (vouching.length === 0 && human?.listed) {
      const newestIssuedAt =
        valid.length === 0 ? undefined : Math.max(...valid.map((b) => parseTimestamp(b.issuedAt, 'bundle.issuedAt')));
      return { jwk: human.jwk, newestIssuedAt };
    }
    if (vouching.length === 0) {
      if (expiredLists) fail('trust_bundle_expired', `the only bundles listing ${grant.issuer} have expired`);
      if (invalidLists) {
        const which = signers.rootVersion > 1 ? ` (root version ${signers.rootVersion}: one of its bundle keys)` : '';
        fail('trust_bundle_invalid', `the bundle listing ${grant.issuer} is not signed by the pinned root${which}`);
      }
      fail('issuer_not_trusted', `no trust bundle lists issuer ${grant.issuer}`);
    }
    const keys = vouching.flatMap((b) => b.issuers.filter((i) => i.issuer === grant.issuer).flatMap((i) => i.keys));
    const jwk = findKey(keys, grant.keyId, 'grant');
    if (human && canonicalize(jwk) !== canonicalize(human.jwk))
      fail('unknown_key', `the bundle lists a key other than the DID's for ${grant.issuer}`);
    const newestIssuedAt = Math.max(...vouching.map((b) => parseTimestamp(b.issuedAt, 'bundle.issuedAt')));
    return { jwk, newestIssuedAt };
  }

  async function keyFromJwks(
    grant: PolicyGrant,
    o: VerifyCtlOptions,
    now: number,
    ttl: number,
    timeoutMs: number,
  ): Promise<PublicJwk> {
    if (o.jwks) return findKey(o.jwks.keys, grant.keyId, 'grant');
    const url = o.jwksUrl!;
    let entry = jwksCache.get(url);
    const stale = !entry || now - entry.at >= ttl;
    const missing = entry && !entry.jwks.keys.some((k) => k.kid === grant.keyId) && now - entry.at > 5_000;
    if (stale || missing) {
      if (o.offline) fail('unknown_key', 'offline, and the JWKS is not cached');
      const online = featureOf(builtIn, 'online', 'jwksUrl needs the JWKS fetched');
      let body: unknown;
      try {
        body = await viaModule(() => online.fetchJson(o.fetch ?? online.hostFetch(), url, { timeoutMs }));
      } catch (e) {
        fail('unknown_key', `the JWKS could not be fetched: ${(e as Error).message}`);
      }
      if (typeof body !== 'object' || body === null || !Array.isArray((body as Jwks).keys))
        fail('unknown_key', 'the JWKS has no keys array');
      entry = remember(jwksCache, url, { at: now, jwks: body as Jwks }, 64);
    }
    return findKey(entry!.jwks.keys, grant.keyId, 'grant');
  }

  /**
   * One signature check per grant and key. Looked up by the grant's signature, then confirmed on
   * the full canonical text and the key (a forged grant reusing a signature is a different entry),
   * so no long string is hashed per payment.
   */
  async function grantSignatureOk(grant: PolicyGrant, grantJcs: string, jwk: PublicJwk): Promise<boolean> {
    const keyId = `${jwk.kty}:${jwk.crv}:${jwk.x}:${jwk.y ?? ''}`;
    const hit = grantChecked.get(grant.signature);
    if (hit && hit.jcs === grantJcs && hit.keyId === keyId) return hit.ok;
    const ok = await verifyArtifactSignature(c, 'grant', grant as unknown as Record<string, unknown>, jwk);
    remember(grantChecked, grant.signature, { jcs: grantJcs, value: parseStrictJson(grantJcs), keyId, ok });
    return ok;
  }

  async function sbaSignatureOk(
    sba: SignedBudgetAuthorization<PolicyGrant | Delegation>,
    grantJcs: string,
  ): Promise<boolean> {
    try {
      return await c.verifyWithJwk(
        sba.grant.actorKey,
        utf8Encode(sbaSignedText(sba, grantJcs)),
        base64urlDecode(sba.signature),
      );
    } catch (e) {
      passUnsupported(e);
      return false;
    }
  }

  /**
   * PROTOCOL.md §5 step 4's stateful part, last of all: the payment (a hold at its maximum) is
   * reserved in every ledger it counts in, one atomic reservation keyed by the SBA's id within
   * its chain (`scope`), so it is accepted at most once, ever (§7). Returns the hold's id.
   */
  async function recordSpend(
    storage: SpendStorage,
    p: {
      o: VerifyCtlOptions;
      sba: SignedBudgetAuthorization<PolicyGrant | Delegation>;
      chain: DelegationChain;
      scope: string;
    },
    t: { amount: bigint; merchantId?: string; now: number; tol: number; bundleIssuedAt?: number },
  ): Promise<string | undefined> {
    const { o, chain } = p;
    const a = p.sba.authorization;
    const grant = chain.root;
    const sbaExpiry = parseTimestamp(a.expiresAt, 'authorization.expiresAt');
    // A ledger remembers the latest time it counted at (PROTOCOL.md §12, §13): without a host
    // floor, the storage's own, so a clock set back reopens no window this ledger saw close.
    const at = o.timeFloor ? t.now : await ledgerNow(storage, LEDGER_CLOCK_KEY, t.now);
    // A time the ledger has counted is a time the verifier has seen: an SBA expired by it is
    // refused, though the clock was set back (its id may be forgotten by then).
    if (at >= sbaExpiry + t.tol) fail('sba_expired', 'the SBA has expired (by the time this ledger has counted)');
    const offlineAllowance = o.offline ? grant.offline : undefined;
    // The offline allowance is counted per refresh (PROTOCOL.md §8: "before it must go online"):
    // the newest bundle that vouched for the issuer, held in a register that only rises, so an
    // older bundle, or none, never reopens a count already spent.
    const epoch =
      offlineAllowance && (offlineAllowance.maxPayments !== undefined || offlineAllowance.maxAmountMinor !== undefined)
        ? await raiseRegister(storage, `offline-epoch:${grant.grantId}`, BigInt(Math.floor(t.bundleIssuedAt ?? 0)), at)
        : 0n;
    // A hold is counted at its maximum until captured (PROTOCOL.md §15).
    const hold = a.capture === 'hold';
    const held = hold ? BigInt(a.maxAmountMinor) : t.amount;
    // Under a chain, every link too, leaf to root, in the one reservation (PROTOCOL.md §13, §14).
    const ledgers = [
      ...linkLedgers(chain, 'grant:', held, at).reverse(),
      ...spendLedgers(grant, held, t.merchantId, at, offlineAllowance, epoch),
    ];
    const payment = { scope: p.scope, id: a.budgetId };
    // The id may be forgotten once the SBA is refused as expired whatever the clock says: at its
    // expiry under a time floor, a day later without one (a clock stepped back less than that
    // cannot revive it). A hold goes back at the SBA's own expiry, uncaptured, never in the
    // clock tolerance: the capture must come before it (PROTOCOL.md §15).
    const options = {
      expiresAt: sbaExpiry + t.tol + (o.timeFloor ? 0 : UNFLOORED_ID_RETENTION_MS),
      now: at,
      ...(hold ? { hold, releaseAt: sbaExpiry } : {}),
    };
    // Presentations of one SBA take turns here: while one holds a reservation that may still
    // be given back, another must not read it as an accepted payment (`replay`).
    const r = await oneAtATime(reservationId(payment), async () => {
      const res = await reserveAll(storage, ledgers, payment, options);
      if (res.ok && !hold) await commitAll(storage, ledgers, payment);
      return res;
    });
    if (!r.ok) {
      if (r.result === 'duplicate') fail('replay', `budgetId ${a.budgetId} was already accepted`);
      throw new CtlError(r.ledger.code, `this payment would exceed ${r.ledger.what}`, { resetsAt: r.ledger.resetsAt });
    }
    return hold ? reservationId(payment) : undefined;
  }

  const verifyCtl: VerifyCtl = async function verifyCtl(input, options) {
    let clockSeen: number | undefined;
    try {
      const o = options ?? ({} as VerifyCtlOptions);
      const time = await readFlooredTime(o.now ?? hostNow, o.timeFloor);
      const now = time.now;
      clockSeen = time.clock;
      // Time is a number or nothing (PROTOCOL.md §12): each time option is checked once, here.
      const tol = timeOption(o.clockToleranceMs, 'options.clockToleranceMs', 0);
      const revocationTtl = timeOption(o.revocationTtl, 'options.revocationTtl', 60_000);
      const revocationTimeoutMs = timeOption(o.revocationTimeoutMs, 'options.revocationTimeoutMs', 3000);
      const jwksTtl = timeOption(o.jwksTtl, 'options.jwksTtl', 300_000);

      // Step 0: parse (closed objects, value rules, consistency with the grant).
      const amount = parsePaymentAmount(o.amount, 'options.amount');
      const currency = parseCurrency(o.currency, 'options.currency');
      const sba = artifactData(input);
      // A grant whose signature this verifier checked before: matched by value to the data of the
      // canonical text it had then (equal by value is equal by bytes; the walk goes no further
      // than that data, so a hostile object graph cannot make it long). That text passed `checkGrant`, so
      // only the authorization is re-checked; any other grant gets the full check before any JCS.
      const g = (sba as { grant?: { signature?: unknown } } | null)?.grant;
      const seen = typeof g?.signature === 'string' ? grantChecked.get(g.signature) : undefined;
      let grantJcs = seen && sameCanonical(g, seen.value) ? seen.jcs : undefined;
      checkSba(sba, grantJcs !== undefined);
      const a = sba.authorization;
      // Under a delegation (PROTOCOL.md §14) the root grant is verified as any grant, then the
      // chain; `eff` is what the leaf allows (its lists), `sbaGrantJcs` the text the SBA signed.
      const chain = chainOf(sba.grant);
      const grant = chain.root;
      const eff = effectiveGrant(sba.grant);
      grantJcs ??= canonicalize(grant);
      const sbaGrantJcs = chain.links.length === 0 ? grantJcs : canonicalize(sba.grant);

      // Step 1: the grant's signature, with the key resolved by issuer + keyId.
      let jwk: PublicJwk | undefined;
      /** The newest `issuedAt` of a live bundle that vouched for this grant's issuer. */
      let bundleIssuedAt: number | undefined;
      const human = grant.profile === 'human-agent';
      if (human) {
        // PROTOCOL.md §10: the key is the DID's own (no JWKS, no PEM); trust is trustedHumans or a bundle.
        const humanAgent = featureOf(builtIn, 'humanAgent', 'a human-agent grant needs its did:key resolved');
        const didJwk =
          didKeys.get(grant.issuer) ??
          remember(didKeys, grant.issuer, await viaModule(() => humanAgent.didKeyToJwk(grant.issuer)), 256);
        const listed = Array.isArray(o.trustedHumans) && o.trustedHumans.includes(grant.issuer);
        if (o.trustBundles?.length) {
          const r = await keyFromBundles(grant, o, now, tol, { jwk: didJwk, listed });
          bundleIssuedAt = r.newestIssuedAt;
        } else if (!listed)
          fail('issuer_not_trusted', `${grant.issuer} is in neither trustedHumans nor a trust bundle`);
        jwk = didJwk;
      } else if (o.trustBundles?.length) {
        const r = await keyFromBundles(grant, o, now, tol);
        jwk = r.jwk;
        bundleIssuedAt = r.newestIssuedAt;
      } else if (o.jwks || o.jwksUrl) {
        jwk = await keyFromJwks(grant, o, now, jwksTtl, revocationTimeoutMs);
      } else {
        const pem = o.signingKeyPem ?? hostEnv('CTL_SBA_SIGNING_PUBLIC_KEY_PEM');
        if (pem) {
          try {
            const k = await c.importVerifyingKey(pem);
            jwk = k.publicJwk;
          } catch (e) {
            passUnsupported(e);
            fail('grant_signature_invalid', 'signingKeyPem is not a usable public key');
          }
        }
      }
      if (!jwk)
        fail('grant_signature_invalid', 'no key to verify the grant: pass trustBundles, jwks/jwksUrl or signingKeyPem');
      if (!(await grantSignatureOk(grant, grantJcs, jwk!)))
        fail('grant_signature_invalid', 'the grant signature does not verify');
      checkWindow(grant, 'grant', 'grant', 'grant_expired', now, tol);
      if (chain.links.length > 0) await walkDelegationChain(c, chain, now, tol, linkSignatures);

      // Step 2: the SBA's signature, always against the key recorded in the grant.
      if (!(await sbaSignatureOk(sba, sbaGrantJcs))) {
        fail('sba_signature_invalid', 'the SBA is not signed by the grant actorKey');
      }
      checkWindow(a, 'SBA', 'authorization', 'sba_expired', now, tol);

      // Step 3: revocation — the bundles' list always, the grant's URL unless offline.
      // Every id of a chain, root first: a revoked link revokes everything below it (PROTOCOL.md §14).
      const ids = chainIds(chain);
      for (const { id, name } of ids)
        if (keptRevoked.has(id) || isKept(o.keptRevocations, id))
          fail('grant_revoked', `${name} is revoked (trust bundle)`);
      if (o.revocationSource !== undefined) {
        // The host's source (a chain's revocation tokens) instead of the URL (src/revocation-source.ts).
        if (typeof o.revocationSource !== 'function') fail('malformed', 'options.revocationSource must be a function');
        askSource ??= createSourceChecker();
        for (const [i, { id, name }] of ids.entries()) {
          const q =
            i === 0
              ? { kind: 'grant' as const, id, tokenId: revocationTokenId(grant), grant }
              : { kind: 'delegation' as const, id, tokenId: id, grant };
          if ((await askSource(o.revocationSource, q, revocationTtl, now)).revoked)
            fail('grant_revoked', `${name} is revoked (revocation source)`);
        }
      } else if (!o.offline) {
        const online = featureOf(builtIn, 'online', 'revocation is checked online unless offline: true');
        revocation ??= online.createRevocationChecker();
        for (const { id, name } of ids) {
          const status = await viaModule(() =>
            revocation!.check(id === grant.grantId ? grant.revocationUrl : linkRevocationUrl(grant, id), id, {
              ttlMs: revocationTtl,
              now,
              fetch: o.fetch ?? online.hostFetch(),
              timeoutMs: revocationTimeoutMs,
            }),
          );
          if (status.revoked) fail('grant_revoked', `${name} is revoked`);
        }
      }

      // Step 4: amounts.
      if (amount > BigInt(a.maxAmountMinor))
        fail(
          'amount_exceeds_authorization',
          `${o.amount} minor units of ${currency} is more than the ${a.maxAmountMinor} authorized`,
        );
      if (currency !== a.currency) fail('currency_mismatch', `the SBA is in ${a.currency}, the payment in ${currency}`);
      const merchantId = o.merchantId ?? a.merchantId;
      const rail = o.rail ?? a.rail;
      const purpose = o.purpose ?? a.purpose;
      // Step 5: destination, rail, asset, purpose.
      if (o.merchantId !== undefined && a.merchantId !== undefined && o.merchantId !== a.merchantId) {
        fail('destination_not_allowed', `the SBA is for merchant ${a.merchantId}, not ${o.merchantId}`);
      }
      if (merchantId !== undefined && eff.destinationAllowlist && !eff.destinationAllowlist.includes(merchantId)) {
        fail('destination_not_allowed', `merchant ${merchantId} is not in the grant's destination allowlist`);
      }
      if (
        (o.rail !== undefined && a.rail !== undefined && o.rail !== a.rail) ||
        (rail !== undefined && !eff.allowedRails.includes(rail))
      ) {
        fail('rail_not_allowed', `rail ${rail} is not allowed`);
      }
      if (o.asset && !eff.allowedAssets.some((x) => x.standard === o.asset!.standard && x.code === o.asset!.code)) {
        fail('asset_not_allowed', `asset ${o.asset.standard}:${o.asset.code} is not allowed`);
      }
      if (
        (o.purpose !== undefined && a.purpose !== undefined && o.purpose !== a.purpose) ||
        (purpose !== undefined && eff.allowedPurposes && !purposeAllowed(purpose, eff.allowedPurposes))
      ) {
        fail('purpose_not_allowed', `purpose ${purpose} is not allowed`);
      }
      if (o.requireIntentHash || human) {
        if (!a.intentHash) fail('malformed', 'intentHash is required (Full and Human-Agent profiles) and absent');
        if (merchantId === undefined || rail === undefined)
          fail('malformed', 'intentHash needs the merchantId and rail of the payment');
        const intent = { currency, merchantId: merchantId!, rail: rail!, purpose };
        if ((await intentHashWith(c, { ...intent, amount: o.amount })) !== a.intentHash) {
          // The SBA was made for another payment: say which part differs where the hash can tell.
          if ((await intentHashWith(c, { ...intent, amount: a.maxAmountMinor })) === a.intentHash) {
            fail(
              'amount_exceeds_authorization',
              `the SBA authorizes a payment of exactly ${a.maxAmountMinor} minor units of ${a.currency}, ` +
                `not ${o.amount}`,
            );
          }
          fail(
            'destination_not_allowed',
            "the SBA's intentHash is for another payment (merchant, rail or purpose differ)",
          );
        }
      }

      // Stateful last, so a payment refused for any other reason consumes nothing (PROTOCOL.md §7).
      const offlineAllowance = o.offline ? grant.offline : undefined;
      if (offlineAllowance?.maxBundleAgeMs !== undefined) {
        // Without a bundle (a key from signingKeyPem or trustedHumans) nothing vouched at all.
        if (bundleIssuedAt === undefined)
          fail(
            'offline_limit_exceeded',
            'this grant limits the age of the trust bundle offline, and no trust bundle vouched for it',
          );
        if (now - bundleIssuedAt > offlineAllowance.maxBundleAgeMs)
          fail('offline_limit_exceeded', 'the trust bundle is older than this grant allows offline');
      }
      // Every stateless check passed: record the time this payment proves (PROTOCOL.md §12), only
      // what the verifier trusts (its clock, its root's bundles), before any ledger forgets an id by it.
      if (o.timeFloor) await o.timeFloor.raise(Math.max(time.clock, bundleIssuedAt ?? 0));
      let holdId: string | undefined;
      if (o.trackSpend || o.offline) {
        const storage = o.spendStorage ?? defaultSpend;
        const leaf = ids.length > 1 ? ids[ids.length - 1]!.id : undefined;
        holdId = await recordSpend(
          storage,
          { o, sba, chain, scope: chainScope(chain, 'grant:', leaf) },
          {
            amount,
            merchantId,
            now,
            tol,
            bundleIssuedAt,
          },
        );
      }
      return {
        valid: true,
        grant,
        sba,
        amount: o.amount,
        currency,
        ...(merchantId !== undefined ? { merchantId } : {}),
        ...(holdId !== undefined ? { holdId } : {}),
      };
    } catch (e) {
      const error = toErrorInfo(e);
      // A refusal by time is a reading to keep at once (not within the minute): a clock set back
      // must not revive what was just seen expired or too old (PROTOCOL.md §12).
      if (options?.timeFloor && clockSeen !== undefined && TIME_REFUSALS.has(error.code)) {
        try {
          await options.timeFloor.raise(clockSeen);
        } catch {
          // the refusal stands either way
        }
      }
      return { valid: false, error };
    }
  };
  verifyCtl.captureCtl = createCaptureCtl(defaultSpend);
  return verifyCtl;
}

const UNFLOORED_ID_RETENTION_MS = 86_400_000;
/** Where a verifier without a host time floor keeps the latest time its ledger has counted at. */
const LEDGER_CLOCK_KEY = LEDGER_CLOCK_KEYS.verifier;
const TIME_REFUSALS = new Set<string>([
  'trust_bundle_expired',
  'grant_expired',
  'sba_expired',
  'offline_limit_exceeded',
]);

/**
 * The ledgers a payment the merchant accepts counts against: the grant's cumulative budget
 * (`trackSpend`), its velocity windows (recorded whenever spend is), and the offline allowance.
 */
function spendLedgers(
  grant: PolicyGrant,
  amount: bigint,
  merchantId: string | undefined,
  now: number,
  offline: PolicyGrant['offline'],
  epoch: bigint,
): Ledger[] {
  const ledgers: Ledger[] = [
    {
      key: `grant:${grant.grantId}`,
      amount,
      ceiling: BigInt(grant.maxAmountMinor),
      code: 'budget_exceeded',
      what: 'the grant budget',
    },
    ...velocityLedgers(grant, amount, merchantId, now),
    ...windowLedgers(grant, amount, now),
  ];
  // The offline allowance bounds what is accepted until the terminal next refreshes: one count per
  // refresh epoch (the issuedAt of the newest bundle that vouched), so a later bundle restores it.
  const key = `${grant.grantId}@${epoch}`;
  if (offline?.maxPayments !== undefined) {
    ledgers.push({
      key: `offline-count:${key}`,
      amount: 1n,
      count: true,
      ceiling: BigInt(offline.maxPayments),
      code: 'offline_limit_exceeded',
      what: 'the offline payment count',
    });
  }
  if (offline?.maxAmountMinor !== undefined) {
    ledgers.push({
      key: `offline-amount:${key}`,
      amount,
      ceiling: BigInt(offline.maxAmountMinor),
      code: 'offline_limit_exceeded',
      what: 'the offline amount',
    });
  }
  return ledgers;
}

function isKept(kept: VerifyCtlOptions['keptRevocations'], id: string): boolean {
  if (kept === undefined) return false;
  if (Array.isArray(kept)) return kept.includes(id);
  if (typeof (kept as ReadonlySet<string>).has === 'function') return (kept as ReadonlySet<string>).has(id);
  return fail('malformed', 'options.keptRevocations must be a Set or an array of grant ids');
}
