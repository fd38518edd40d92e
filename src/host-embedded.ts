/**
 * host.ts as the role IIFEs (`dist/ctl-verify.iife.js`, `dist/ctl-wallet.iife.js`) see it: an
 * embedded engine (QuickJS, a bare ECMAScript engine) has no node:crypto, no WebCrypto and no
 * environment, so those probes are constants and the native backends and CryptoKey inputs drop out of the bundle
 * (rollup.config.mjs swaps this file in). Randomness comes from the firmware (`setRandomSource`)
 * or the engine's `crypto.getRandomValues`; UTF-8 and the clock as in host.ts.
 */
export { hostGetRandomValues, hostFetch, hostSleep, hostNow, hostTextEncode } from './host.js';

/** No node:crypto in an embedded engine. @example hostNodeCrypto() // undefined */
export const hostNodeCrypto = (): any | undefined => undefined;
/** No WebCrypto in an embedded engine: every signature goes through noble. @example hostSubtle() // undefined */
export const hostSubtle = (): SubtleCrypto | undefined => undefined;
/** No CryptoKey without WebCrypto: key inputs are PEM, JWK or raw bytes there. @example isCryptoKey(k) // false */
export const isCryptoKey = (_v: unknown): _v is CryptoKey => false;
/** No environment in an embedded engine. @example hostEnv('CTL_SBA_SIGNING_PUBLIC_KEY_PEM') // undefined */
export const hostEnv = (_name: string): string | undefined => undefined;
