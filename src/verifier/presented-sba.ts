/**
 * PROTOCOL.md §5 step 0: the SBA presented, read once into data of the verifier's own (§12) and
 * parsed (closed objects, value rules, its consistency with its grant, §4), with the canonical
 * texts every later step reads: the root grant's and each delegation link's, each written once.
 */
import type { Delegation, PolicyGrant, SignedBudgetAuthorization } from '../artifacts/types.js';
import type { VerifyCtlOptions } from './options.js';
import { checkSba } from '../artifacts/sba.js';
import {
  chainOf,
  effectiveGrant,
  isDelegation,
  MAX_DELEGATION_DEPTH,
  type DelegationChain,
} from '../artifacts/delegation.js';
import { linkTexts, type LinkText } from '../artifacts/chain-text.js';
import { canonicalize } from '../encoding/jcs.js';
import { artifactData } from '../encoding/frozen-copy.js';
import { parseCurrency, parsePaymentAmount } from '../values.js';

/** What step 0 read: the payment asked for and the SBA with its chain, and their texts. */
export interface PresentedSba {
  amount: bigint;
  currency: string;
  sba: SignedBudgetAuthorization<PolicyGrant | Delegation>;
  /** The root grant and the links below it (none for a plain grant). */
  chain: DelegationChain;
  /** What the leaf allows as one grant (its lists, ceiling, times): for the checks of steps 4 and 5. */
  eff: PolicyGrant;
  /** The root grant's canonical text. */
  grantJcs: string;
  /** Each link's texts, root first (chain-text.ts). */
  links: LinkText[];
  /** The text the SBA signed as its `grant`: the root's, or the leaf link's. */
  sbaGrantJcs: string;
}

/**
 * A grant this verifier checked before (signature-steps.ts): its canonical text when `grant`
 * equals it by value, so neither the text nor, for a plain grant, the grant's checks are redone.
 */
export type KnownGrantText = (grant: unknown) => string | undefined;

/**
 * Step 0. Throws `CtlError` (`malformed`, `unsupported_version` and the codes of §4).
 * @example const p = readPresentedSba(req.body.sba, options, known)
 */
export function readPresentedSba(input: unknown, o: VerifyCtlOptions, known: KnownGrantText): PresentedSba {
  const amount = parsePaymentAmount(o.amount, 'options.amount');
  const currency = parseCurrency(o.currency, 'options.currency');
  const sba = artifactData(input);
  // A root grant whose signature this verifier checked before keeps the text it had then. A plain
  // grant's text passed `checkGrant`, so only the authorization is re-checked; a chain is checked
  // whole, and any other grant gets the full check before any JCS.
  const presented = (sba as { grant?: unknown } | null)?.grant;
  const root = rootCandidate(presented);
  const knownText = known(root);
  checkSba(sba, knownText !== undefined && root === presented);
  // Under a delegation (PROTOCOL.md §14) the root grant is verified as any grant, then the chain.
  const chain = chainOf(sba.grant);
  const grantJcs = knownText ?? canonicalize(chain.root);
  const links = linkTexts(chain, grantJcs);
  return {
    amount,
    currency,
    sba,
    chain,
    eff: effectiveGrant(sba.grant),
    grantJcs,
    links,
    sbaGrantJcs: links.length === 0 ? grantJcs : links[links.length - 1]!.whole,
  };
}

/** The grant at the top of what may be a chain, before it is checked (so never deeper than a chain may be). */
function rootCandidate(g: unknown): unknown {
  for (let depth = 0; depth < MAX_DELEGATION_DEPTH && isDelegation(g); depth++) g = g.parent;
  return g;
}
