/**
 * Delegation (`ctl-delegation/1`, PROTOCOL.md §14): the holder of an artifact's `actorKey` hands
 * another key part of what it holds. Build, sign, parse, and the narrowing rules each link obeys;
 * the verifier walks a chain with them (verifier/delegation-chain.ts).
 */
import type { CtlCrypto, PrivateKeyInput, PublicKeyInput, SigningKey } from '../crypto/types.js';
import type { Asset, BudgetWindow, Delegation, PolicyGrant } from './types.js';
import {
  amount,
  arrayOf,
  asset,
  bad,
  checkShape,
  checkTimeOrder,
  checkVersion,
  identifier,
  isPlainObject,
  purposePattern,
  rail,
  printable,
  signature,
  thumbprintJwk,
  timestamp,
  version,
  type Shape,
} from './schema.js';
import { checkGrant } from './grant.js';
import { checkWindowRules, windows } from './windows.js';
import { signArtifact } from './signing.js';
import { canonicalize } from '../encoding/jcs.js';
import { fail } from '../errors.js';
import { formatTimestamp, isAmount, parseTimestamp, purposeAllowed, readClock } from '../values.js';
import { hostNow } from '../host.js';
import { newId } from '../ids.js';

/** The most links any grant may allow below it (`delegation.maxDepth` is 1–4). */
export const MAX_DELEGATION_DEPTH = 4;

const delegationShape: Shape = {
  version: [true, version],
  delegationId: [true, identifier],
  parent: [true, () => undefined], // checked by checkDelegation, one level at a time
  actorKey: [true, thumbprintJwk],
  maxAmountMinor: [true, amount],
  issuedAt: [true, timestamp],
  expiresAt: [true, timestamp],
  allowedPurposes: [false, arrayOf(purposePattern, { max: 256, unique: true })],
  allowedRails: [false, arrayOf(rail, { max: 64, unique: true })],
  allowedAssets: [false, arrayOf(asset, { max: 64 })],
  destinationAllowlist: [false, arrayOf(printable(256), { min: 1, max: 1024, unique: true })],
  windows: [false, windows],
  windowsStart: [false, timestamp],
  keyId: [true, identifier],
  signature: [true, signature],
};

/** A delegation's members in JCS order (a closed object, PROTOCOL.md §3): chain-text.ts writes them. */
export const DELEGATION_MEMBERS: readonly string[] = Object.keys(delegationShape).sort();

/** A delegation rather than a grant: it names itself by `delegationId`. */
export function isDelegation(value: unknown): value is Delegation {
  return isPlainObject(value) && Object.prototype.hasOwnProperty.call(value, 'delegationId');
}

/**
 * Structure and value rules of a delegation and of every parent down to the root grant, in place;
 * throws `CtlError` (`malformed`, `unsupported_version`; `delegation_invalid` for a chain longer
 * than any grant may allow, refused before it is walked any further).
 */
export function checkDelegation(value: unknown, field = 'delegation'): asserts value is Delegation {
  let node: unknown = value;
  let path = field;
  for (let depth = 1; ; depth++) {
    if (depth > MAX_DELEGATION_DEPTH)
      fail('delegation_invalid', `${field}: more than ${MAX_DELEGATION_DEPTH} delegations below the root grant`);
    checkVersion(node, path);
    checkShape(node, path, delegationShape);
    checkTimeOrder(node, path);
    // A window above the link's own ceiling widens the link (PROTOCOL.md §14), not its shape.
    checkWindowRules(node, path, 'delegation_invalid');
    const parent = node['parent'];
    path += '.parent';
    if (!isDelegation(parent)) {
      checkGrant(parent, path);
      return;
    }
    node = parent;
  }
}

/** A grant or a delegation, each by its own rules. */
export function checkGrantOrDelegation(value: unknown, field: string): asserts value is PolicyGrant | Delegation {
  if (isDelegation(value)) checkDelegation(value, field);
  else checkGrant(value, field);
}

/** A checked chain: the root grant and its links, root first (empty for a plain grant). */
export interface DelegationChain {
  root: PolicyGrant;
  links: Delegation[];
}

/** @example const { root, links } = chainOf(sba.grant) */
export function chainOf(g: PolicyGrant | Delegation): DelegationChain {
  const links: Delegation[] = [];
  let node: PolicyGrant | Delegation = g;
  while (isDelegation(node)) {
    links.unshift(node);
    node = node.parent;
  }
  return { root: node, links };
}

/** The id a link or a grant answers to: `authorization.grantId`, revocation, ledgers. */
export function idOf(g: PolicyGrant | Delegation): string {
  return isDelegation(g) ? g.delegationId : g.grantId;
}

type ListName = 'allowedPurposes' | 'allowedRails' | 'allowedAssets' | 'destinationAllowlist';
const LISTS: readonly ListName[] = ['allowedPurposes', 'allowedRails', 'allowedAssets', 'destinationAllowlist'];

/**
 * What an artifact allows as one grant: for a delegation, the root's policy, currency, issuer,
 * revocation and offline allowance with the leaf's id, key, ceiling, times, lists (a list the leaf
 * lacks is the nearest ancestor's, PROTOCOL.md §14) and windows. Not a signed artifact: for checks
 * and for what an SBA copies, never for a signature.
 * @example effectiveGrant(sba.grant).allowedRails
 */
export function effectiveGrant(g: PolicyGrant | Delegation): PolicyGrant {
  if (!isDelegation(g)) return g;
  const { root, links } = chainOf(g);
  const view: Record<string, unknown> = { ...root };
  for (const k of ['windows', 'windowsStart', 'delegation'] as const) delete view[k];
  const leaf = links[links.length - 1]!;
  Object.assign(view, {
    grantId: leaf.delegationId,
    actorKey: leaf.actorKey,
    maxAmountMinor: leaf.maxAmountMinor,
    issuedAt: leaf.issuedAt,
    expiresAt: leaf.expiresAt,
  });
  if (leaf.windows) Object.assign(view, { windows: leaf.windows });
  if (leaf.windowsStart) Object.assign(view, { windowsStart: leaf.windowsStart });
  for (const k of LISTS) {
    for (let i = links.length - 1; i >= 0; i--) {
      if (links[i]![k] !== undefined) {
        view[k] = links[i]![k];
        break;
      }
    }
  }
  return view as unknown as PolicyGrant;
}

const sameAsset = (a: Asset, b: Asset) => a.standard === b.standard && a.code === b.code;
const jwkId = (k: { kty: string; crv: string; x: string; y?: string }) => `${k.kty}:${k.crv}:${k.x}:${k.y ?? ''}`;

/**
 * PROTOCOL.md §14: `child` only narrows `parent` (both checked). `ancestors`: the root grant and
 * the links above `child`, root first. Throws `CtlError('delegation_invalid')` naming the member
 * that widened, as `<field>.<member>`.
 * @example checkNarrowing(grant, [grant], delegation, 'delegation')
 */
export function checkNarrowing(
  parent: PolicyGrant | Delegation,
  ancestors: readonly (PolicyGrant | Delegation)[],
  child: Delegation,
  field: string,
): void {
  const widened = (member: string, why: string): never =>
    fail('delegation_invalid', `${field}.${member} ${why}`) as never;
  if (BigInt(child.maxAmountMinor) > BigInt(parent.maxAmountMinor))
    widened('maxAmountMinor', `${child.maxAmountMinor} is above its parent's ${parent.maxAmountMinor}`);
  if (parseTimestamp(child.expiresAt, 'expiresAt') > parseTimestamp(parent.expiresAt, 'expiresAt'))
    widened('expiresAt', `${child.expiresAt} is after its parent's ${parent.expiresAt}`);
  if (parseTimestamp(child.issuedAt, 'issuedAt') < parseTimestamp(parent.issuedAt, 'issuedAt'))
    widened('issuedAt', `${child.issuedAt} is before its parent's ${parent.issuedAt}`);
  // Every list the parent has is present in the child and a subset of it; a list the parent lacks
  // may be set. (The root's rails and assets are required, so every link carries them.)
  for (const k of LISTS) {
    const mine = child[k] as unknown[] | undefined;
    const theirs = parent[k] as unknown[] | undefined;
    if (theirs === undefined) continue;
    if (mine === undefined) widened(k, 'is absent, and its parent restricts it');
    for (const item of mine!) {
      const ok =
        k === 'allowedAssets'
          ? (theirs as Asset[]).some((a) => sameAsset(a, item as Asset))
          : k === 'allowedPurposes'
            ? purposeCovered(item as string, theirs as string[])
            : (theirs as string[]).includes(item as string);
      if (!ok) widened(k, `holds ${canonicalize(item)}, which its parent does not allow`);
    }
  }
  // Every window of the parent has a window of the same period in the child, no larger (§13).
  for (const w of (parent.windows ?? []) as BudgetWindow[]) {
    const c = child.windows?.find((x) => x.every === w.every);
    if (!c) widened('windows', `lacks the parent's ${w.every} window`);
    if (BigInt(c!.maxAmountMinor) > BigInt(w.maxAmountMinor))
      widened('windows', `${w.every} allows ${c!.maxAmountMinor}, above its parent's ${w.maxAmountMinor}`);
    if (w.maxPayments !== undefined && (c!.maxPayments === undefined || c!.maxPayments > w.maxPayments))
      widened('windows', `${w.every} allows more payments than its parent's ${w.maxPayments}`);
  }
  for (const a of ancestors) {
    if (jwkId(a.actorKey) === jwkId(child.actorKey)) widened('actorKey', 'is the key of one of its ancestors');
    if (idOf(a) === child.delegationId) widened('delegationId', 'repeats the id of one of its ancestors');
  }
}

/** A child's purpose (`d:k` or `d:*`) is covered by the parent's list: the same entry or `d:*`. */
function purposeCovered(p: string, list: readonly string[]): boolean {
  return p.endsWith(':*') ? list.includes(p) : purposeAllowed(p, list);
}

/**
 * The members a delegator chooses (PROTOCOL.md §14); `delegationId` and `issuedAt` may be left
 * to the signer, and `actorKey` may be any public JWK or PEM.
 */
export interface DelegationFields {
  actorKey: PublicKeyInput;
  maxAmountMinor: string;
  expiresAt: string;
  delegationId?: string;
  issuedAt?: string;
  allowedPurposes?: string[];
  allowedRails?: string[];
  allowedAssets?: Asset[];
  destinationAllowlist?: string[];
  windows?: BudgetWindow[];
  windowsStart?: string;
}

export interface CreateDelegationOptions {
  /** The private half of the parent's `actorKey`. */
  signingKey: PrivateKeyInput | SigningKey;
  now?: () => number;
}

/**
 * Signs a delegation under `parent` (a PolicyGrant or a delegation), refusing to sign anything a
 * verifier would refuse to read or that widens its parent (`delegation_invalid`, naming the
 * member) or that goes deeper than the root's `delegation.maxDepth`.
 */
export async function createDelegationWith(
  c: CtlCrypto,
  parentInput: PolicyGrant | Delegation,
  fields: DelegationFields,
  options: CreateDelegationOptions,
): Promise<Delegation> {
  if (!fields || typeof fields !== 'object') throw new TypeError('createDelegation: fields must be an object');
  if (!options?.signingKey) throw new TypeError('createDelegation: options.signingKey is required');
  const parent = JSON.parse(JSON.stringify(parentInput)) as PolicyGrant | Delegation;
  checkGrantOrDelegation(parent, 'parent');
  const signer = await c.importSigningKey(options.signingKey);
  if (jwkId(signer.publicJwk) !== jwkId(parent.actorKey))
    throw new RangeError("createDelegation: signingKey is not the parent's actorKey");
  let actorKey;
  try {
    actorKey = await c.toPublicJwk(fields.actorKey);
  } catch {
    bad('actorKey', 'must be a public key (JWK or PEM) for Ed25519 or P-256');
  }
  const now = readClock(options.now ?? hostNow, 'options.now');
  const unsigned: Record<string, unknown> = {
    version: 1,
    delegationId: fields.delegationId ?? newId('dlg_'),
    parent,
    actorKey,
    maxAmountMinor: fields.maxAmountMinor,
    issuedAt: fields.issuedAt ?? formatTimestamp(now),
    expiresAt: fields.expiresAt,
    allowedPurposes: fields.allowedPurposes,
    allowedRails: fields.allowedRails ?? parent.allowedRails,
    allowedAssets: fields.allowedAssets ?? parent.allowedAssets,
    destinationAllowlist: fields.destinationAllowlist ?? parent.destinationAllowlist,
    // Left unset, the parent's windows are kept as they are, counted from the same start (PROTOCOL.md §13).
    windows:
      fields.windows ??
      // Each kept at most the child's own ceiling (§13: no window above the artifact's maxAmountMinor).
      parent.windows?.map((w) =>
        isAmount(fields.maxAmountMinor) && BigInt(w.maxAmountMinor) > BigInt(fields.maxAmountMinor)
          ? { ...w, maxAmountMinor: fields.maxAmountMinor }
          : w,
      ),
    windowsStart:
      fields.windowsStart ??
      (fields.windows === undefined && parent.windows ? (parent.windowsStart ?? parent.issuedAt) : undefined),
    keyId: await c.jwkThumbprint(parent.actorKey),
  };
  // Left unset, a list the parent restricts is inherited as it is: the narrowest choice that is not a refusal.
  if (unsigned['allowedPurposes'] === undefined) unsigned['allowedPurposes'] = parent.allowedPurposes;
  for (const k of Object.keys(unsigned)) if (unsigned[k] === undefined) delete unsigned[k];
  const draft = { ...unsigned, signature: 'A'.repeat(86) };
  checkDelegation(draft);
  const { root, links } = chainOf(draft as unknown as Delegation);
  if (links.length > (root.delegation?.maxDepth ?? 0))
    fail('delegation_invalid', `the root grant allows ${root.delegation?.maxDepth ?? 0} delegations below it`);
  checkNarrowing(parent, [root, ...links.slice(0, -1)], draft as unknown as Delegation, 'delegation');
  return (await signArtifact(c, 'delegation', unsigned, signer)) as unknown as Delegation;
}
