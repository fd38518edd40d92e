/**
 * `ctl/server` (`dist/server.js`): what only a service needs beside `ctl`: receipt signing per
 * payment (a gateway) and a verifier with caches of its own. A device never loads it. See
 * docs/sdk-api.md.
 */
import { defaultCrypto } from '../crypto/index.js';
import { createVerifier, type VerifyCtl } from '../verifier/verify.js';
import { humanAgentProfile } from './human-agent.js';
import { onlineChecks } from './online.js';

export { signReceiptPrepared, type ReceiptFields } from '../artifacts/receipt.js';
export type { FetchLike } from '../net/fetch-json.js';
export type { VerifyCtl };

/**
 * A verifier as `verifyCtl` of `ctl` (Human-Agent profile and online checks included), with caches
 * of its own: a caller that must not reuse another call's revocation answer or in-flight fetch
 * (PROTOCOL.md §10: a person's revocation stops the next payment) makes one per call.
 * @example const r = await createVerifyCtl()(sba, { amount, currency, trustedHumans: [did], revocationTtl: 0, fetch })
 */
export function createVerifyCtl(): VerifyCtl {
  return createVerifier(defaultCrypto, { humanAgent: humanAgentProfile, online: onlineChecks });
}
