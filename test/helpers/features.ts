// Every optional verifier module (src/verifier/features.ts), as `ctl` builds its verifier: for tests
// that drive `createVerifier` directly through online and Human-Agent cases.
import { humanAgentProfile } from '../../src/entries/human-agent.js';
import { onlineChecks } from '../../src/entries/online.js';
import type { VerifierFeatures } from '../../src/verifier/features.js';

export const ALL_FEATURES: VerifierFeatures = { humanAgent: humanAgentProfile, online: onlineChecks };
