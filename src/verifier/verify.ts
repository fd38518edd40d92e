/**
 * The merchant verifier (spec §4.4, PROTOCOL.md §5): parse → grant signature → SBA signature →
 * revocation → amounts → destination, failing closed, the first failing check giving the code.
 * It never throws: hostile input is `{ valid: false, error }`. Each step is its own function, in
 * the module named for it; this one holds the order and the verifier's caches.
 *
 * Built by `createVerifier(crypto)` so `dist/edge.js` can carry a WebCrypto-only copy.
 */
import type { CtlCrypto } from '../crypto/types.js';
import type { VerifyCtl, VerifyCtlOptions, VerifyCtlResult } from './options.js';
import { readPresentedSba } from './presented-sba.js';
import { createSignatureSteps } from './signature-steps.js';
import { createRevocationStep } from './revocation-step.js';
import { checkAmounts, checkDestination, checkIntent } from './payment-checks.js';
import { createSpendRecorder } from './spend-record.js';
import type { VerifyTimes } from './grant-key.js';
import { createCaptureCtl } from './capture.js';
import { readFlooredTime } from './time-floor.js';
import type { VerifierFeatures } from './features.js';
import { toErrorInfo } from '../errors.js';
import { timeOption } from '../values.js';
import { hostNow } from '../host.js';

export type { VerifyCtl, VerifyCtlOptions, VerifyCtlResult } from './options.js';

/**
 * A verifier with its own caches (grant signatures, bundles, JWKS, revocation, spend). `builtIn`:
 * the optional modules this build carries (features.ts); the others come from registration.
 * @example const verifyCtl = createVerifier(defaultCrypto); await verifyCtl(sba, { amount: '30', currency: 'USD' })
 */
export function createVerifier(c: CtlCrypto, builtIn: VerifierFeatures = {}): VerifyCtl {
  const signatures = createSignatureSteps(c, builtIn);
  const checkRevocation = createRevocationStep(builtIn);
  const spend = createSpendRecorder();

  const verifyCtl: VerifyCtl = async function verifyCtl(input, options): Promise<VerifyCtlResult> {
    let clockSeen: number | undefined;
    try {
      const o = options ?? ({} as VerifyCtlOptions);
      const time = await readFlooredTime(o.now ?? hostNow, o.timeFloor);
      clockSeen = time.clock;
      const t = readTimes(o, time.now);
      // PROTOCOL.md §5 step 0: parse (closed objects, value rules, consistency with the grant).
      const p = readPresentedSba(input, o, signatures.knownGrantText);
      // Step 1: the grant's signature, with the key resolved by issuer + keyId; then its chain (§14).
      const bundleIssuedAt = await signatures.verifyGrant(p, o, t);
      await signatures.verifyChain(p, t);
      // Step 2: the SBA's signature, always against the key recorded in the grant.
      await signatures.verifySba(p, t);
      // Step 3: revocation, the bundles' list always, the grant's URL unless offline.
      const ids = await checkRevocation(p, o, t, signatures.keptRevoked);
      // Step 4: amounts; step 5: destination, rail, asset, purpose; then the intent (§4).
      checkAmounts(p, o);
      const target = checkDestination(p, o);
      await checkIntent(c, p, o, target);
      // Stateful last, so a payment refused for any other reason consumes nothing (PROTOCOL.md §7).
      const { merchantId } = target;
      const holdId = await spend.record(p, o, t, { merchantId, bundleIssuedAt, ids, clock: time.clock });
      return {
        valid: true,
        grant: p.chain.root,
        sba: p.sba,
        amount: o.amount,
        currency: p.currency,
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
  verifyCtl.captureCtl = createCaptureCtl(spend.defaultSpend);
  return verifyCtl;
}

/** Time is a number or nothing (PROTOCOL.md §12): each time option is checked once, here. */
function readTimes(o: VerifyCtlOptions, now: number): VerifyTimes {
  return {
    now,
    tol: timeOption(o.clockToleranceMs, 'options.clockToleranceMs', 0),
    revocationTtl: timeOption(o.revocationTtl, 'options.revocationTtl', 60_000),
    revocationTimeoutMs: timeOption(o.revocationTimeoutMs, 'options.revocationTimeoutMs', 3000),
    jwksTtl: timeOption(o.jwksTtl, 'options.jwksTtl', 300_000),
  };
}

const TIME_REFUSALS = new Set<string>([
  'trust_bundle_expired',
  'grant_expired',
  'sba_expired',
  'offline_limit_exceeded',
]);
