/**
 * `ctl/human-agent` (`dist/human-agent.js`, `dist/ctl-human-agent.iife.js` with global
 * `CTLHumanAgent`): the Human-Agent profile (PROTOCOL.md §10) for the role verifiers, opt-in: a
 * terminal that accepts grants issued by a person's did:key registers it with the entry it
 * verifies with (`ctl` and `ctl/edge` carry it already):
 *
 * import { registerHumanAgent } from 'ctl/verify'; import { humanAgentProfile } from 'ctl/human-agent';
 * registerHumanAgent(humanAgentProfile);
 */
import { didKeyToJwk } from '../encoding/did-key.js';
import type { HumanAgentSupport } from '../verifier/features.js';

/** did:key resolution, checked as a JWK would be. @example registerHumanAgent(humanAgentProfile) */
export const humanAgentProfile: HumanAgentSupport = { didKeyToJwk };
export type { HumanAgentSupport };
