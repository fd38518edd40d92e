/**
 * Many SBAs under one grant, for a party that signs them at volume (a gateway session, a fleet
 * wallet service): exported by `ctl/wallet`.
 */
import { defaultCrypto } from '../crypto/index.js';
import { prepareSbaSigning, signPreparedSba, type SbaFields, type SignSbaOptions } from '../artifacts/sba.js';
import type { PolicyGrant, SignedBudgetAuthorization } from '../artifacts/types.js';
import { frozenJsonCopy } from '../encoding/frozen-copy.js';
import { hostNow } from '../host.js';

/** Signs SBAs under one grant, the grant checked and canonicalised once. */
export interface SbaSigner {
  /** The grant signed over: a deep-frozen copy taken when the signer was made, embedded by every SBA it signs. */
  readonly grant: PolicyGrant;
  /** The canonical text of `grant` (JCS), taken once when the signer was made. */
  readonly grantJcs: string;
  sign(fields: Omit<SbaFields, 'grant'>): Promise<SignedBudgetAuthorization>;
}

/**
 * The grant is checked, copied frozen and canonicalised once, the key imported and matched to
 * `grant.actorKey` once; each `sign` builds and checks only the authorization. Later edits to the
 * caller's grant object change nothing (PROTOCOL.md §12): a renewed grant needs a new signer.
 * @example const signer = await createSbaSigner(grant, { signingKey }); const sba = await signer.sign({ sessionId,
 * actorId: 'agent-1', maxAmountMinor: '30' })
 */
export async function createSbaSigner(grant: PolicyGrant, options: SignSbaOptions = {}): Promise<SbaSigner> {
  const prepared = await prepareSbaSigning(defaultCrypto, frozenJsonCopy(grant), options);
  return {
    grant: prepared.grant as PolicyGrant, // checked as given: a grant, never a chain, by this signature
    grantJcs: prepared.grantJcs,
    sign: (fields) => signPreparedSba<PolicyGrant>(defaultCrypto, prepared, fields, (options.now ?? hostNow)()),
  };
}
