/**
 * SignedBudgetAuthorization (`ctl-sba/1`, PROTOCOL.md §4): one per payment, signed by the wallet's
 * `actorKey`, carrying the full signed grant so one value verifies end to end.
 */
import type { CtlCrypto, PrivateKeyInput, SigningKey } from '../crypto/types.js';
import type { Authorization, BudgetScope, Delegation, PolicyGrant, SignedBudgetAuthorization } from './types.js';
import {
  amount,
  arrayOf,
  asset,
  bad,
  checkShape,
  checkTimeOrder,
  checkVersion,
  currency,
  hash,
  identifier,
  issuer,
  printable,
  purpose,
  rail,
  signature,
  str,
  timestamp,
  version,
  checked,
  type Shape,
} from './schema.js';
import { checkGrantOrDelegation, effectiveGrant } from './delegation.js';
import { fail } from '../errors.js';
import { canonicalize, canonicalizeKnown, quoteJson } from '../encoding/jcs.js';
import { ownData } from '../encoding/frozen-copy.js';
import { utf8Encode } from '../encoding/utf8.js';
import { remember } from '../crypto/cache.js';
import { base64urlEncode, hexEncode } from '../encoding/base64url.js';
import { formatTimestamp, parseTimestamp, readClock } from '../values.js';
import { hostEnv, hostNow } from '../host.js';
import { newId } from '../ids.js';

const authorizationShape: Shape = {
  budgetId: [true, identifier],
  sessionId: [true, identifier],
  actorId: [true, printable(256)],
  grantId: [true, identifier],
  policyHash: [true, hash],
  currency: [true, currency],
  maxAmountMinor: [true, amount],
  allowedRails: [true, arrayOf(rail, { max: 64, unique: true })],
  allowedAssets: [true, arrayOf(asset, { max: 64 })],
  destinationAllowlist: [true, arrayOf(printable(256), { max: 1024, unique: true })],
  budgetScope: [true, str(/^(SESSION|TRIP)$/, '"SESSION" or "TRIP"')],
  issuedAt: [true, timestamp],
  expiresAt: [true, timestamp],
  rail: [false, rail],
  merchantId: [false, printable(256)],
  purpose: [false, purpose],
  intentHash: [false, hash],
  // PROTOCOL.md §15: `maxAmountMinor` is a hold, captured once at most, for no more than it.
  capture: [false, str(/^hold$/, '"hold"')],
};

// The authorization is a closed object (PROTOCOL.md §4): its members' JCS order is fixed ahead.
const authorizationKeys = Object.keys(authorizationShape).sort();

const sbaShape: Shape = {
  version: [true, version],
  authorization: [true, (v, f) => checkShape(v, f, authorizationShape)],
  // A grant, or the leaf of a delegation chain (PROTOCOL.md §14).
  grant: [true, (v, f) => checkGrantOrDelegation(v, f)],
  issuer: [false, issuer],
  keyId: [true, identifier],
  signature: [true, signature],
};

// A signer passes the grant's own (frozen) arrays: one value needs no canonical comparison.
const same = (a: unknown, b: unknown) => a === b || canonicalize(a) === canonicalize(b);

// For a grant whose canonical text already passed `checkGrant` (the check is a function of the
// JSON value alone, so the same text passes again): remembered by bytes, never by object (PROTOCOL.md §12).
const sbaOfKnownGrantShape: Shape = { ...sbaShape, grant: [true, checked] };

// What a signer builds before the signature exists. The grant, and what the authorization copies
// of it (the same values, held there to the same rules), were checked when prepared: each SBA
// checks what its caller gave.
const builtAuthorizationShape: Shape = {
  ...authorizationShape,
  grantId: [true, checked],
  policyHash: [true, checked],
  currency: [true, checked],
  allowedRails: [true, checked],
  allowedAssets: [true, checked],
  destinationAllowlist: [true, checked],
};
const sbaUnsignedShape: Shape = {
  ...sbaOfKnownGrantShape,
  authorization: [true, (v, f) => checkShape(v, f, builtAuthorizationShape)],
  signature: [false, signature],
};

/**
 * Structure, value rules and consistency with the embedded grant (PROTOCOL.md §4, §5 step 0).
 * Throws `CtlError` with `malformed`, `unsupported_version`, `policy_hash_mismatch`,
 * `currency_mismatch` or `budget_exceeded`. `grantTextChecked`: the caller holds the embedded
 * grant's canonical text and has seen that text pass `checkGrant` (the verifier's hot path).
 */
export function checkSba(
  value: unknown,
  grantTextChecked = false,
): asserts value is SignedBudgetAuthorization<PolicyGrant | Delegation> {
  checkVersion(value, 'sba');
  if (typeof value === 'object' && value !== null)
    checkVersion((value as Record<string, unknown>)['grant'], 'sba.grant');
  checkShape(value, 'sba', grantTextChecked ? sbaOfKnownGrantShape : sbaShape);
  checkConsistency(value);
}

/** PROTOCOL.md §4: the authorization agrees with its grant (both already of the right shape). */
function checkConsistency(value: Record<string, unknown>): void {
  const a = value['authorization'] as Authorization;
  // Under a delegation: the leaf's id, ceiling, expiry and lists, the root's policy (PROTOCOL.md §14).
  const g = effectiveGrant(value['grant'] as PolicyGrant | Delegation);
  if (a.grantId !== g.grantId) bad('sba.authorization.grantId', 'differs from the grant');
  if (a.policyHash !== g.policyHash)
    fail('policy_hash_mismatch', 'the authorization and its grant differ in policyHash');
  if (a.currency !== g.currency) fail('currency_mismatch', 'the authorization and its grant differ in currency');
  for (const k of ['allowedRails', 'allowedAssets', 'destinationAllowlist'] as const) {
    if (!same(a[k], g[k] ?? [])) bad(`sba.authorization.${k}`, 'differs from the grant');
  }
  if (value['issuer'] !== undefined && value['issuer'] !== g.issuer) bad('sba.issuer', 'differs from grant.issuer');
  // PROTOCOL.md §10: a person's agent authorizes one named payment at a time, never a blank amount.
  if (g.profile === 'human-agent' && a.intentHash === undefined)
    bad('sba.authorization.intentHash', 'is required under a human-agent grant');
  if (
    checkTimeOrder(a as unknown as Record<string, unknown>, 'sba.authorization') >
    parseTimestamp(g.expiresAt, 'sba.grant.expiresAt')
  )
    bad('sba.authorization.expiresAt', 'is later than the grant expiry');
  if (BigInt(a.maxAmountMinor) > BigInt(g.maxAmountMinor)) {
    fail('budget_exceeded', 'the authorization is for more than the grant allows');
  }
}

/**
 * The signed text of a checked SBA when its grant's canonical text is at hand: as UTF-8, the same
 * bytes as `signedBytes('sba', sba)` (PROTOCOL.md §3; a closed object, PROTOCOL.md §4, so its
 * members' JCS order is known), without canonicalizing the embedded grant again on the hot paths
 * (a signer's grant, a verifier's grant seen before). With another `head` and `signatureMember`
 * (`,"signature":` and the signature as a JSON string), the SBA as a larger signed text embeds it
 * (a receipt, receipt.ts).
 * @example utf8Encode(sbaSignedText(sba, canonicalize(sba.grant))) // = signedBytes('sba', sba)
 */
export function sbaSignedText(
  sba: SignedBudgetAuthorization<PolicyGrant | Delegation>,
  grantJcs: string,
  head = 'ctl-sba/1\n',
  signatureMember?: string,
): string {
  return (
    head +
    '{"authorization":' +
    canonicalizeKnown(sba.authorization, authorizationKeys) +
    ',"grant":' +
    grantJcs +
    (sba.issuer === undefined ? '' : ',"issuer":' + quoteJson(sba.issuer)) +
    ',"keyId":' +
    quoteJson(sba.keyId) +
    (signatureMember ?? '') +
    ',"version":1}'
  ); // checked: 1 is the only version
}

/** The one payment an SBA authorizes, hashed (PROTOCOL.md §4 `intentHash`). */
export interface PaymentIntent {
  amount: string;
  currency: string;
  merchantId: string;
  rail: string;
  purpose?: string;
}

/**
 * hex SHA-256 of JCS of the payment intent. @example await intentHashWith(c, { amount: '30', currency: 'USD',
 * merchantId: 'm', rail: 'x402' })
 */
export async function intentHashWith(c: CtlCrypto, intent: PaymentIntent): Promise<string> {
  const doc: Record<string, string> = {
    amount: intent.amount,
    currency: intent.currency,
    merchantId: intent.merchantId,
    rail: intent.rail,
  };
  if (intent.purpose !== undefined) doc['purpose'] = intent.purpose;
  const text = canonicalize(doc);
  let known = intentHashes.get(c);
  if (!known) intentHashes.set(c, (known = new Map()));
  return known.get(text) ?? remember(known, text, hexEncode(await c.sha256(utf8Encode(text))), 256);
}

// A wallet pays the same few intents again and again (the same price at the same merchant): their
// hashes, remembered by canonical text (a function of the text alone, so never stale), per crypto
// backend (one backend's answers never stand in for another's).
const intentHashes = new WeakMap<CtlCrypto, Map<string, string>>();

export interface SbaFields {
  /** The grant, or the delegation (the leaf of a chain) the SBA draws on. */
  grant: PolicyGrant | Delegation;
  sessionId: string;
  actorId: string;
  /** For a gateway SBA, the payment amount (spec §8). */
  maxAmountMinor: string;
  budgetScope?: BudgetScope;
  budgetId?: string;
  issuedAt?: string;
  /** Defaults to five minutes from now, never past the grant. */
  expiresAt?: string;
  rail?: string;
  merchantId?: string;
  purpose?: string;
  /** Computed when `merchantId` and `rail` are both known, unless given. */
  intentHash?: string;
  issuer?: string;
  /** A hold (PROTOCOL.md §15): `maxAmountMinor` is the most the merchant may capture. */
  hold?: boolean;
}

export interface SignSbaOptions {
  /** Defaults to `CTL_SBA_SIGNING_PRIVATE_KEY_PEM`. Must be the private half of `grant.actorKey`. */
  signingKey?: PrivateKeyInput | SigningKey;
  /** Defaults to `CTL_SBA_SIGNING_KEY_ID`, else the key's thumbprint. */
  keyId?: string;
  now?: () => number;
}

/** An SBA's lifetime when none is given, never past its grant's. */
export const DEFAULT_SBA_TTL_MS = 5 * 60_000;

/**
 * What signing many SBAs under one grant computes once: the checked grant, its canonical bytes,
 * the signer (checked to be `grant.actorKey`) and the keyId. A wallet session prepares its own
 * frozen copy of the grant once, so the text cannot go stale (PROTOCOL.md §12).
 */
export interface PreparedSbaSigning {
  grant: PolicyGrant | Delegation;
  /** What `grant` allows as one grant (itself, or a chain's effective view: PROTOCOL.md §14). */
  effective: PolicyGrant;
  /** The grant's canonical text. */
  grantJcs: string;
  grantExpiry: number;
  signer: SigningKey;
  keyId: string;
}

/**
 * @example const p = await prepareSbaSigning(c, frozenGrant, { signingKey }); await signPreparedSba(c, p, fields,
 * Date.now())
 */
export async function prepareSbaSigning(
  c: CtlCrypto,
  grant: PolicyGrant | Delegation,
  options: SignSbaOptions = {},
): Promise<PreparedSbaSigning> {
  checkGrantOrDelegation(grant, 'grant');
  const key = options.signingKey ?? hostEnv('CTL_SBA_SIGNING_PRIVATE_KEY_PEM');
  if (!key)
    throw new TypeError(
      'createSignedSessionBudgetAuthorization: options.signingKey is required (or CTL_SBA_SIGNING_PRIVATE_KEY_PEM)',
    );
  const signer = await c.importSigningKey(key);
  const k = signer.publicJwk;
  const a = grant.actorKey;
  if (k.kty !== a.kty || k.crv !== a.crv || k.x !== a.x || k.y !== a.y) {
    throw new RangeError(
      'createSignedSessionBudgetAuthorization: signingKey is not the key recorded in grant.actorKey',
    );
  }
  const keyId = options.keyId ?? hostEnv('CTL_SBA_SIGNING_KEY_ID') ?? (await c.jwkThumbprint(signer.publicJwk));
  return {
    grant,
    effective: effectiveGrant(grant),
    grantJcs: canonicalize(grant),
    grantExpiry: parseTimestamp(grant.expiresAt, 'grant.expiresAt'),
    signer,
    keyId,
  };
}

export async function createSbaWith<G extends PolicyGrant | Delegation = PolicyGrant>(
  c: CtlCrypto,
  fields: SbaFields & { grant: G },
  options: SignSbaOptions = {},
): Promise<SignedBudgetAuthorization<G>> {
  if (!fields || typeof fields !== 'object')
    throw new TypeError('createSignedSessionBudgetAuthorization: fields must be an object');
  // The grant's bytes are taken now, from the object as it is (PROTOCOL.md §12): a cache per
  // grant object would sign stale bytes for a grant replaced in place by a renewed one. Signed
  // from its own copy, each member read once: the members the SBA copies are the ones checked and
  // the ones in the signed text.
  return signPreparedSba<G>(
    c,
    await prepareSbaSigning(c, ownData(fields.grant) as PolicyGrant | Delegation, options),
    fields,
    readClock(options.now ?? hostNow, 'options.now'),
  );
}

/**
 * Signs one SBA under a prepared grant: the authorization is built from the grant's fields and
 * checked (shape and consistency, PROTOCOL.md §4); the grant itself was checked when prepared.
 */
export async function signPreparedSba<G extends PolicyGrant | Delegation = PolicyGrant | Delegation>(
  c: CtlCrypto,
  p: PreparedSbaSigning,
  fields: Omit<SbaFields, 'grant'>,
  now: number,
): Promise<SignedBudgetAuthorization<G>> {
  const { grant, effective: e, grantExpiry, signer, keyId } = p;
  const expiresAt = fields.expiresAt ?? formatTimestamp(Math.min(now + DEFAULT_SBA_TTL_MS, grantExpiry));
  let intentHash = fields.intentHash;
  if (intentHash === undefined && fields.merchantId !== undefined && fields.rail !== undefined) {
    intentHash = await intentHashWith(c, {
      amount: fields.maxAmountMinor,
      currency: e.currency,
      merchantId: fields.merchantId,
      rail: fields.rail,
      purpose: fields.purpose,
    });
  }
  const authorization: Record<string, unknown> = {
    budgetId: fields.budgetId ?? newId('bud_'),
    sessionId: fields.sessionId,
    actorId: fields.actorId,
    grantId: e.grantId,
    policyHash: e.policyHash,
    currency: e.currency,
    maxAmountMinor: fields.maxAmountMinor,
    allowedRails: e.allowedRails,
    allowedAssets: e.allowedAssets,
    destinationAllowlist: e.destinationAllowlist ?? [],
    budgetScope: fields.budgetScope ?? 'SESSION',
    issuedAt: fields.issuedAt ?? formatTimestamp(now),
    expiresAt,
    rail: fields.rail,
    merchantId: fields.merchantId,
    purpose: fields.purpose,
    intentHash,
    capture: fields.hold ? 'hold' : undefined,
  };
  for (const k of Object.keys(authorization)) if (authorization[k] === undefined) delete authorization[k];
  const unsigned: Record<string, unknown> = { version: 1, authorization, grant, keyId };
  if (fields.issuer !== undefined) unsigned['issuer'] = fields.issuer;
  checkShape(unsigned, 'sba', sbaUnsignedShape);
  checkConsistency(unsigned);
  const sba = unsigned as unknown as SignedBudgetAuthorization<G>;
  sba.signature = base64urlEncode(await signer.sign(utf8Encode(sbaSignedText(sba, p.grantJcs))));
  return sba;
}
