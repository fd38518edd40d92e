/**
 * `ctl/online` (`dist/online.js`): revocation checks by `revocationUrl` and JWKS by URL (spec
 * §4.4 step 3, PROTOCOL.md §5) for the role verifiers, opt-in: a terminal with a network that
 * verifies without `offline: true` registers it with the entry it verifies with (`ctl` and
 * `ctl/edge` carry it already; an embedded engine without fetch verifies offline):
 *
 * import { registerOnlineChecks } from 'ctl/verify'; import { onlineChecks } from 'ctl/online';
 * registerOnlineChecks(onlineChecks);
 */
import { createRevocationChecker } from '../revocation.js';
import { fetchJson } from '../net/fetch-json.js';
import { hostFetch } from '../host.js';
import type { FetchLike } from '../net/fetch-json.js';
import type { OnlineChecks } from '../verifier/features.js';

/** Bounded strict JSON GETs and the revocation cache. @example registerOnlineChecks(onlineChecks) */
export const onlineChecks: OnlineChecks = {
  fetchJson,
  createRevocationChecker: () => createRevocationChecker(),
  hostFetch: () => hostFetch() as FetchLike | undefined,
};
export type { OnlineChecks };
