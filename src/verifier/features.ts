/**
 * What a verifier may carry beyond the offline core: a device gets what a device needs, and the
 * rest is registered by the caller, as P-256 is (crypto/algorithm-support.ts):
 *
 * import { registerHumanAgent } from 'ctl/verify'; import { humanAgentProfile } from 'ctl/human-agent';
 * registerHumanAgent(humanAgentProfile);
 * import { registerOnlineChecks } from 'ctl/verify'; import { onlineChecks } from 'ctl/online';
 * registerOnlineChecks(onlineChecks);
 *
 * - the Human-Agent profile (PROTOCOL.md §10): did:key resolution of a human issuer's key;
 * - online checks (spec §4.4 step 3, PROTOCOL.md §5): revocation by `revocationUrl`, JWKS by URL.
 *
 * `ctl` carries both, `ctl/edge` online checks. A build meeting a grant or an option that needs a
 * module it lacks refuses it with `unsupported_feature` (PROTOCOL.md §16), the message naming the
 * module to register: never a throw, never a pass, never a code that blames the artifact.
 *
 * A module object may come from another bundle (its own copy of `CtlError`), so what it throws is
 * taken back here by its code.
 */
import { CtlError, isCtlErrorCode, fail } from '../errors.js';
import type { PublicJwk } from '../crypto/types.js';
import type { RevocationChecker } from '../revocation.js';
import type { FetchLike } from '../net/fetch-json.js';

/** The Human-Agent profile, as `ctl/human-agent` exports it. */
export interface HumanAgentSupport {
  /** The public JWK a did:key names, checked as a JWK would be; throws `malformed` or `unsupported_algorithm`. */
  didKeyToJwk(did: string): PublicJwk;
}

/** The online checks, as `ctl/online` exports them. */
export interface OnlineChecks {
  /** A bounded strict JSON GET; throws `CtlError(failCode)` on any failure. */
  fetchJson(
    fetchFn: FetchLike | undefined,
    url: string,
    o?: { timeoutMs?: number; failCode?: 'revocation_unavailable' | 'unknown_key' },
  ): Promise<unknown>;
  /** A revocation cache (TTL, coalesced requests, fail closed). */
  createRevocationChecker(): RevocationChecker;
  /** The host's fetch where it has one. */
  hostFetch(): FetchLike | undefined;
}

/** The modules a verifier may carry; `createVerifier` takes the ones built in. */
export interface VerifierFeatures {
  humanAgent?: HumanAgentSupport;
  online?: OnlineChecks;
}

const registered: VerifierFeatures = {};

const check = (name: string, m: object | undefined, methods: string[]) => {
  if (m !== undefined && !methods.every((k) => typeof (m as Record<string, unknown>)[k] === 'function')) {
    throw new TypeError(`${name}(module): an object with ${methods.join(', ')}`);
  }
};

/**
 * Registers the Human-Agent profile (PROTOCOL.md §10) for this build's verifier (`undefined` removes it).
 * @example import { humanAgentProfile } from 'ctl/human-agent'; registerHumanAgent(humanAgentProfile)
 */
export function registerHumanAgent(m: HumanAgentSupport | undefined): void {
  check('registerHumanAgent', m, ['didKeyToJwk']);
  registered.humanAgent = m;
}

/**
 * Registers online revocation and JWKS-by-URL checks for this build's verifier (`undefined` removes them).
 * @example import { onlineChecks } from 'ctl/online'; registerOnlineChecks(onlineChecks)
 */
export function registerOnlineChecks(m: OnlineChecks | undefined): void {
  check('registerOnlineChecks', m, ['fetchJson', 'createRevocationChecker', 'hostFetch']);
  registered.online = m;
}

const MODULE = { humanAgent: 'human-agent', online: 'online' };

/**
 * The module `name`, built in or registered, or `CtlError('unsupported_feature')` saying `why` it
 * was needed and which module to register.
 * @example featureOf(builtIn, 'online', 'revocation is checked online unless offline: true')
 */
export function featureOf<K extends keyof VerifierFeatures>(
  builtIn: VerifierFeatures,
  name: K,
  why: string,
): NonNullable<VerifierFeatures[K]> {
  const m = builtIn[name] ?? registered[name];
  if (!m)
    fail(
      'unsupported_feature',
      `${why}, and this build lacks that module: register ctl/${MODULE[name]} (docs/sdk-api.md)`,
    );
  return m as NonNullable<VerifierFeatures[K]>;
}

/**
 * Runs a module's call, taking what it throws back as this bundle's `CtlError` by its code.
 * @example const jwk = await viaModule(() => human.didKeyToJwk(did))
 */
export async function viaModule<T>(f: () => T | Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    const code = (e as { code?: unknown } | null)?.code;
    throw !(e instanceof CtlError) && isCtlErrorCode(code) ? new CtlError(code, String((e as Error).message)) : e;
  }
}
