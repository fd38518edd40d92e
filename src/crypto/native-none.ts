/**
 * native.ts for the role IIFEs (rollup.config.mjs): an embedded engine has neither node:crypto nor
 * WebCrypto, so there is no native backend and every signature goes through noble.
 */
import type { Backend } from './backend.js';

/** @example createNativeBackend(undefined) // undefined */
export const createNativeBackend = (_nc: unknown): Backend | undefined => undefined;
