/**
 * `ctl/p256` (`dist/p256.js`, `dist/ctl-p256.iife.js` with global `CTLP256`): the pure-JS P-256
 * (@noble/curves), opt-in, for a host with neither node:crypto nor WebCrypto (QuickJS, bare
 * engines). It registers nothing by itself; the host does, with the entry it verifies or signs with:
 *
 *   import { registerP256 } from 'ctl/verify'; import { nobleP256 } from 'ctl/p256'; registerP256(nobleP256);
 */
export { nobleP256 } from '../crypto/noble-p256.js';
export type { P256Provider } from '../crypto/algorithm-support.js';
